package server

import (
	"net/http"

	"factory/internal/problem"
)

// Error is the API error type; see package problem.
type Error = problem.Error

// Codes the server's handlers use.
const (
	CodeInvalidRequest         = problem.InvalidRequest
	CodeAuthenticationRequired = problem.AuthenticationRequired
	CodeNotAuthorized          = problem.NotAuthorized
	CodeNotFound               = problem.NotFound
	CodeConflict               = problem.Conflict
	CodeOperationNotSupported  = problem.Unprocessable
)

func errorf(code, msg string) *Error { return problem.Errorf(code, msg) }

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	problem.Write(w, r, err, s.log)
}

func writeJSON(w http.ResponseWriter, status int, v any) { problem.JSON(w, status, v) }
