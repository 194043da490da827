// Package jiratest is a fake Jira Cloud site for tests, on loopback: the
// comments of its issues. Every request is checked against Jira's
// published REST v3 description (the comment operations and the Comment
// schema) and every comment's body against Atlassian's ADF JSON Schema,
// both in the shared API descriptions; a test fails on anything they do
// not allow.
package jiratest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"factory/internal/apicheck"
)

// Email and Token are the account the fake takes.
const (
	Email = "factory@acme.example"
	Token = "ATATT-factory-test-token"
)

// Fake is a Jira site on loopback.
type Fake struct {
	URL      string
	Problems *apicheck.Problems

	mu       sync.Mutex
	next     int
	Comments []*Comment
	// Fail answers the next requests 500.
	Fail int
}

// Comment is a comment on an issue, its body as sent (ADF).
type Comment struct {
	ID, Issue string
	Body      json.RawMessage
	Edits     int
}

func load(t testing.TB) (*apicheck.JiraOperations, *apicheck.Schema) {
	t.Helper()
	f, err := os.Open(apicheck.SharedFile(t, "jira_comment_ops.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, err := apicheck.LoadJira(f)
	if err != nil {
		t.Fatal(err)
	}
	a, err := os.Open(apicheck.SharedFile(t, "adf-full-v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	adf, err := apicheck.LoadSchema(a, "adf-full-v1.json", "")
	if err != nil {
		t.Fatal(err)
	}
	return ops, adf
}

// ADF is Atlassian's ADF schema, for tests of documents.
func ADF(t testing.TB) *apicheck.Schema {
	_, adf := load(t)
	return adf
}

// New starts a fake Jira; the test fails on every problem its requests had.
func New(t testing.TB) *Fake {
	t.Helper()
	ops, adf := load(t)
	f := &Fake{Problems: &apicheck.Problems{}}
	f.URL = apicheck.Serve(t, "Jira", ops.Handler(http.HandlerFunc(f.serve), adf, f.Problems), f.Problems)
	return f
}

// Snapshot runs fn with the fake's state held still.
func (f *Fake) Snapshot(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if u, p, ok := r.BasicAuth(); !ok || u != Email || p != Token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"errorMessages":["You are not authenticated. Authentication required to perform this operation."]}`))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Fail > 0 {
		f.Fail--
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"errorMessages":["the fake was told to fail"]}`))
		return
	}
	var in struct {
		Body json.RawMessage `json:"body"`
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	_ = json.Unmarshal(b, &in)
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/rest/api/3/issue/"), "/")
	switch {
	case r.Method == http.MethodPost && len(parts) == 2:
		f.next++
		c := &Comment{ID: fmt.Sprint(10000 + f.next), Issue: parts[0], Body: in.Body}
		f.Comments = append(f.Comments, c)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(f.view(c))
	case r.Method == http.MethodPut && len(parts) == 3:
		for _, c := range f.Comments {
			if c.Issue == parts[0] && c.ID == parts[2] {
				c.Body, c.Edits = in.Body, c.Edits+1
				_ = json.NewEncoder(w).Encode(f.view(c))
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errorMessages":["Can not find a comment for the id."]}`))
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *Fake) view(c *Comment) map[string]any {
	return map[string]any{"id": c.ID, "self": f.URL + "/rest/api/3/issue/" + c.Issue + "/comment/" + c.ID, "body": c.Body,
		"created": "2025-07-01T10:00:00.000+0000", "updated": "2025-07-01T10:00:00.000+0000"}
}
