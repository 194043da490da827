package factory

import (
	"errors"
	"fmt"
)

// Error codes of the domain, in the manner of WTF Dial's: each layer
// returns them, and the HTTP layer maps each to one problem code and
// status in one place (package problem).
const (
	EINVALID   = "invalid"   // the request is malformed or breaks a rule
	ENOTFOUND  = "not_found" // what it names does not exist
	ECONFLICT  = "conflict"  // the state forbids it (already done, in use)
	EFORBIDDEN = "forbidden" // the caller may not do it
	EINTERNAL  = "internal"  // anything else: not the caller's doing
)

// Error is an error whose message is for the user, with a code that says
// what kind of failure it is.
type Error struct {
	Code    string
	Message string
	// Final says that asking again cannot help (a conflict that stays):
	// the HTTP layer tells clients not to retry.
	Final bool
}

func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode is the code of err: "" for nil, EINTERNAL for an error that is
// not an *Error.
func ErrorCode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	}
	return EINTERNAL
}
