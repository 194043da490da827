package factory

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

// UID prefixes (docs/spec/definitions.md).
const (
	PrefixWebhook    = "wh_"
	PrefixAutomation = "au_"
	PrefixFactory    = "fc_"
	PrefixForeman    = "fm_"
	PrefixRun        = "run_"
	PrefixDelivery   = "dlv_"
)

// IDEncoding is lowercase Crockford base32 without padding, for UIDs and
// other IDs: its alphabet is in byte order, so encodings sort like the
// bytes they encode.
var IDEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// MintID is the one way IDs are made: prefix, then head (a part that
// orders IDs, such as a time, or nothing), then random bytes, all in
// IDEncoding. It panics if the system's random source fails, which Go
// documents as never happening on supported platforms: an ID that is not
// random is worse than no ID.
func MintID(prefix string, head []byte, random int) string {
	var buf [32]byte // IDs are short: no allocation on the ingress path
	b := buf[:0]
	if len(head)+random > len(buf) {
		b = make([]byte, 0, len(head)+random)
	}
	b = append(b, head...)
	b = b[:len(head)+random]
	if _, err := rand.Read(b[len(head):]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return prefix + IDEncoding.EncodeToString(b)
}

// DerivedID is an ID that the same parts always give: prefix, then 120
// bits of the SHA-256 of the parts. Work that must happen once per
// something (a run per delivery and automation) takes its ID from that
// something, so that doing it again finds the first result.
func DerivedID(prefix string, parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return prefix + IDEncoding.EncodeToString(h[:UIDRandomBytes])
}

// NewUID returns prefix + 120 random bits in lowercase Crockford base32:
// URL-safe, unguessable, and easy to read aloud.
func NewUID(prefix string) string { return MintID(prefix, nil, UIDRandomBytes) }

// ValidUID reports whether s looks like a UID with the prefix.
func ValidUID(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) < 16 || len(rest) > 64 {
		return false
	}
	for _, c := range rest {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// NewUUID returns a random (version 4) UUID: what the platform API's
// artifact UIDs are.
func NewUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}
