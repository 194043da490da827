package factory

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// UID prefixes (definitions.md).
const (
	PrefixWebhook    = "wh_"
	PrefixAutomation = "au_"
	PrefixFactory    = "fc_"
	PrefixForeman    = "fm_"
)

// IDEncoding is lowercase Crockford base32 without padding, for UIDs and
// other IDs: its alphabet is in byte order, so encodings sort like the
// bytes they encode.
var IDEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewUID returns prefix + 120 random bits in lowercase Crockford base32:
// URL-safe, unguessable, and easy to read aloud.
func NewUID(prefix string) string {
	b := make([]byte, UIDRandomBytes)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	return prefix + IDEncoding.EncodeToString(b)
}

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
