// Package problem renders every HTTP error of the service, API and ingress
// alike, as RFC 7807 problem details, in one place. A handler returns an
// *Error whose code decides the status; anything else is internal.
package problem

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"factory"
)

// Error codes and the statuses they answer (docs/spec/agents-api.md, docs/spec/ingress.md).
const (
	InvalidRequest         = "invalid_request"
	AuthenticationRequired = "authentication_required"
	NotAuthorized          = "not_authorized"
	NotFound               = "resource_not_found"
	MethodNotAllowed       = "method_not_allowed"
	Conflict               = "conflict"
	TooLarge               = "payload_too_large"
	Unprocessable          = "operation_not_supported"
	Unavailable            = "resource_unavailable"
	Internal               = "internal_error"
)

var statusOf = map[string]int{
	InvalidRequest:         http.StatusBadRequest,
	AuthenticationRequired: http.StatusUnauthorized,
	NotAuthorized:          http.StatusForbidden,
	NotFound:               http.StatusNotFound,
	MethodNotAllowed:       http.StatusMethodNotAllowed,
	Conflict:               http.StatusConflict,
	TooLarge:               http.StatusRequestEntityTooLarge,
	Unprocessable:          http.StatusUnprocessableEntity,
	Unavailable:            http.StatusTooManyRequests,
	Internal:               http.StatusInternalServerError,
}

// Error is an error a caller sees: a code that decides the status, and a
// message for the caller. RetryAfter, when set, becomes the Retry-After
// header (whole seconds).
type Error struct {
	Code       string
	Message    string
	RetryAfter int
	// Retryable marks an error retryable whatever its code; NoRetry marks
	// it not retryable whatever its code (an Idempotency-Key used with
	// another body: a retry would conflict again).
	Retryable, NoRetry bool
}

// retryableCodes are the codes a retry can help
// (docs/spec/platform-api.md, Errors).
var retryableCodes = map[string]bool{Conflict: true, Unavailable: true, Internal: true}

// retryable says whether the caller may retry.
func (e *Error) retryable() bool {
	if e.NoRetry {
		return false
	}
	return e.Retryable || e.RetryAfter > 0 || retryableCodes[e.Code]
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds an *Error.
func Errorf(code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Status is the HTTP status of a code.
func Status(code string) int { return statusOf[code] }

type body struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
	Detail    string `json:"detail,omitempty"`
	Instance  string `json:"instance"`
	TraceID   string `json:"trace_id"`
	Retryable bool   `json:"retryable"`
}

// fromDomain is the one mapping of the domain's error codes to problem
// codes (and so to statuses).
var fromDomain = map[string]string{
	factory.EINVALID:   InvalidRequest,
	factory.ENOTFOUND:  NotFound,
	factory.ECONFLICT:  Conflict,
	factory.EFORBIDDEN: NotAuthorized,
}

// Of is the *Error a caller sees for err: err itself, a domain error
// mapped to its problem code, or nil for an internal error.
func Of(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var de *factory.Error
	if errors.As(err, &de) {
		if code, ok := fromDomain[de.Code]; ok {
			return &Error{Code: code, Message: de.Message, NoRetry: de.Final}
		}
	}
	return nil
}

// Write renders err. An error that is neither an *Error nor a domain error
// of a known code is internal: its text goes to the log, never to the
// caller. Every answer carries the request path (instance) and a trace ID
// that the log carries too; one that a retry cannot help says so with
// x-should-retry: false, which the SDKs obey.
func Write(w http.ResponseWriter, r *http.Request, err error, log *slog.Logger) {
	trace := traceID()
	e := Of(err)
	if e == nil {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "trace_id", trace, "err", err)
		e = Errorf(Internal, "internal error")
	} else if log != nil {
		log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "trace_id", trace, "code", e.Code, "detail", e.Message)
	}
	status := statusOf[e.Code]
	title := http.StatusText(status)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	retryable := e.retryable()
	if !retryable {
		h.Set("X-Should-Retry", "false")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body{Type: "https://factory.invalid/errors/" + e.Code, Title: title, Status: status,
		Error: title + ": " + e.Message, Detail: e.Message, Instance: r.URL.Path, TraceID: trace, Retryable: retryable})
}

// traceID names one error answer, in the answer and in the log.
func traceID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// JSON writes a JSON answer.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
