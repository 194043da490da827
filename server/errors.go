package server

import (
	"encoding/json"
	"errors"
	"net/http"
)

// Error codes and their statuses (agents-api.md). Every error the API
// answers is one of these, rendered as RFC 7807 in writeError.
const (
	CodeInvalidRequest         = "invalid_request"
	CodeAuthenticationRequired = "authentication_required"
	CodeNotAuthorized          = "not_authorized"
	CodeNotFound               = "resource_not_found"
	CodeConflict               = "conflict"
	CodeUnavailable            = "resource_unavailable"
	CodeInternal               = "internal_error"
)

var statusOf = map[string]int{
	CodeInvalidRequest:         http.StatusBadRequest,
	CodeAuthenticationRequired: http.StatusUnauthorized,
	CodeNotAuthorized:          http.StatusForbidden,
	CodeNotFound:               http.StatusNotFound,
	CodeConflict:               http.StatusConflict,
	CodeUnavailable:            http.StatusTooManyRequests,
	CodeInternal:               http.StatusInternalServerError,
}

// Error is an API error: a code that decides the status, and a message
// for the caller.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, msg string) *Error { return &Error{Code: code, Message: msg} }

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"`
}

// writeError renders any error as application/problem+json. Errors that
// are not *Error are internal: their text stays in the log, not the answer.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = errorf(CodeInternal, "internal error")
	}
	status := statusOf[e.Code]
	title := http.StatusText(status)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{Type: "https://factory.invalid/errors/" + e.Code, Title: title,
		Status: status, Error: title + ": " + e.Message, Detail: e.Message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
