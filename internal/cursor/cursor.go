// Package cursor makes paging cursors opaque and tamper-evident: a cursor
// is a position and an HMAC of it under a server key, so a client can pass
// it back but cannot forge, edit or carry it to another list.
package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// ErrInvalid says a cursor was not made by this server for this list.
var ErrInvalid = errors.New("invalid cursor")

// maxLen bounds a cursor presented by a client.
const maxLen = 1024

// Seal returns the cursor of a position within a scope (the list it pages,
// such as a webhook's deliveries), so it cannot be used on another list.
func Seal(key []byte, scope, position string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(position)) + "." +
		base64.RawURLEncoding.EncodeToString(mac(key, scope, position))
}

// Open returns the position of a cursor made by Seal with the same key and
// scope.
func Open(key []byte, scope, c string) (string, error) {
	if len(c) > maxLen {
		return "", ErrInvalid
	}
	p, m, ok := strings.Cut(c, ".")
	if !ok {
		return "", ErrInvalid
	}
	pos, err1 := base64.RawURLEncoding.Strict().DecodeString(p)
	sum, err2 := base64.RawURLEncoding.Strict().DecodeString(m)
	if err1 != nil || err2 != nil || !hmac.Equal(sum, mac(key, scope, string(pos))) {
		return "", ErrInvalid
	}
	// The decoder skips line breaks, even in strict mode: a cursor is
	// valid only in the one spelling Seal gives it.
	if base64.RawURLEncoding.EncodeToString(pos) != p || base64.RawURLEncoding.EncodeToString(sum) != m {
		return "", ErrInvalid
	}
	return string(pos), nil
}

func mac(key []byte, scope, position string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(position))
	return h.Sum(nil)[:16]
}
