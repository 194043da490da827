// Package lineartest is a fake Linear GraphQL API for tests, on loopback:
// agent sessions' activities, issues' comments and attachments. Every
// request is checked against Linear's GraphQL schema (the one @linear/sdk is
// generated from, in the shared API descriptions): the document must
// validate, its variables must be of their declared input types, and an
// activity's content must be of a type the schema's AgentActivityType has.
// A test fails on anything else. Answers carry exactly the fields the
// document selects.
package lineartest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/validator"

	"factory/internal/apicheck"
)

// Token is the OAuth actor token the fake takes.
const Token = "lin_oauth_factory_test_token"

var (
	schemaOnce sync.Once
	schema     *ast.Schema
	schemaErr  error
)

// Schema is Linear's schema, loaded once per test binary.
func Schema(t testing.TB) *ast.Schema {
	t.Helper()
	path := apicheck.SharedFile(t, "linear-schema.graphql")
	schemaOnce.Do(func() {
		b, err := os.ReadFile(path)
		if err != nil {
			schemaErr = err
			return
		}
		schema, schemaErr = gqlparser.LoadSchema(&ast.Source{Name: "linear-schema.graphql", Input: string(b)})
	})
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	return schema
}

// Check validates an operation and its variables against the schema; nil
// when both are as Linear would take them.
func Check(s *ast.Schema, query string, vars map[string]any) []string {
	doc, errs := gqlparser.LoadQuery(s, query)
	var out []string
	for _, e := range errs {
		out = append(out, e.Message)
	}
	if len(out) > 0 {
		return out
	}
	for _, op := range doc.Operations {
		if _, err := validator.VariableValues(s, op, vars); err != nil {
			out = append(out, err.Error())
		}
	}
	return out
}

// Fake is a Linear workspace on loopback.
type Fake struct {
	URL      string
	Problems *apicheck.Problems

	schema      *ast.Schema
	mu          sync.Mutex
	next        int
	Activities  []Activity
	Comments    []*Comment
	Attachments []Attachment
	// Fail answers the next calls of a root field with a GraphQL error.
	Fail map[string]int
}

// Activity is an activity added to an agent session.
type Activity struct{ Session, Type, Body string }

// Comment is a comment on an issue.
type Comment struct {
	ID, Issue, Body string
	Edits           int
}

// Attachment is a URL linked to an issue.
type Attachment struct{ Issue, URL, Title string }

// New starts a fake Linear; the test fails on every problem its requests had.
func New(t testing.TB) *Fake {
	t.Helper()
	f := &Fake{Problems: &apicheck.Problems{}, schema: Schema(t), Fail: map[string]int{}}
	f.URL = apicheck.Serve(t, "Linear", http.HandlerFunc(f.serve), f.Problems) + "/graphql"
	return f
}

// Snapshot runs fn with the fake's state held still.
func (f *Fake) Snapshot(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *Fake) problem(format string, args ...any) {
	f.Problems.Add(fmt.Sprintf(format, args...))
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		f.problem("%s %s with %q: Linear takes POST of application/json", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
	}
	if auth := r.Header.Get("Authorization"); auth != "Bearer "+Token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"errors":[{"message":"Authentication required, not authenticated","extensions":{"code":"AUTHENTICATION_ERROR"}}]}`))
		return
	}
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err := json.Unmarshal(body, &req); err != nil {
		f.problem("the body is not a GraphQL request: %v", err)
		return
	}
	if probs := Check(f.schema, req.Query, req.Variables); len(probs) > 0 {
		for _, p := range probs {
			f.problem("%s: %s", firstLine(req.Query), p)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"message": probs[0]}}})
		return
	}
	doc, _ := gqlparser.LoadQuery(f.schema, req.Query)
	f.mu.Lock()
	defer f.mu.Unlock()
	data := map[string]any{}
	for _, sel := range doc.Operations[0].SelectionSet {
		field := sel.(*ast.Field)
		if f.Fail[field.Name] > 0 {
			f.Fail[field.Name]--
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"message": "internal server error"}}})
			return
		}
		val, err := f.resolve(field, args(field, req.Variables))
		if err != nil {
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []map[string]string{{"message": err.Error()}}})
			return
		}
		data[field.Alias] = project(val, field.SelectionSet)
	}
	f.Problems.Record(firstLine(req.Query))
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// resolve runs one root field of the fake's.
func (f *Fake) resolve(field *ast.Field, a map[string]any) (map[string]any, error) {
	f.next++
	id := fmt.Sprintf("00000000-0000-4000-8000-%012d", f.next)
	in, _ := a["input"].(map[string]any)
	switch field.Name {
	case "agentActivityCreate":
		content, _ := in["content"].(map[string]any)
		typ, _ := content["type"].(string)
		body, _ := content["body"].(string)
		if enum := f.schema.Types["AgentActivityType"]; enum == nil || enum.EnumValues.ForName(typ) == nil || body == "" {
			f.problem("agentActivityCreate: content %v is not an activity of a type AgentActivityType has, with a body", content)
		}
		f.Activities = append(f.Activities, Activity{Session: fmt.Sprint(in["agentSessionId"]), Type: typ, Body: body})
		return map[string]any{"success": true, "lastSyncId": 1.0, "agentActivity": map[string]any{"id": id}}, nil
	case "commentCreate":
		c := &Comment{ID: id, Issue: fmt.Sprint(in["issueId"]), Body: fmt.Sprint(in["body"])}
		f.Comments = append(f.Comments, c)
		return map[string]any{"success": true, "lastSyncId": 1.0, "comment": map[string]any{"id": c.ID}}, nil
	case "commentUpdate":
		for _, c := range f.Comments {
			if c.ID == a["id"] {
				c.Body, c.Edits = fmt.Sprint(in["body"]), c.Edits+1
				return map[string]any{"success": true, "lastSyncId": 1.0, "comment": map[string]any{"id": c.ID}}, nil
			}
		}
		return nil, fmt.Errorf("Entity not found: Comment")
	case "attachmentLinkURL":
		at := Attachment{Issue: fmt.Sprint(a["issueId"]), URL: fmt.Sprint(a["url"]), Title: fmt.Sprint(a["title"])}
		for _, old := range f.Attachments {
			if old.Issue == at.Issue && old.URL == at.URL {
				return map[string]any{"success": true, "lastSyncId": 1.0, "attachment": map[string]any{"id": id}}, nil
			}
		}
		f.Attachments = append(f.Attachments, at)
		return map[string]any{"success": true, "lastSyncId": 1.0, "attachment": map[string]any{"id": id}}, nil
	}
	f.problem("%s: a field the fake does not serve", field.Name)
	return nil, fmt.Errorf("not served by the fake: %s", field.Name)
}

// args are a field's arguments with its variables put in.
func args(field *ast.Field, vars map[string]any) map[string]any {
	out := map[string]any{}
	for _, a := range field.Arguments {
		v, _ := a.Value.Value(vars)
		out[a.Name] = v
	}
	return out
}

// project keeps of a value the fields a selection set asks for, under
// their aliases.
func project(v any, set ast.SelectionSet) any {
	m, ok := v.(map[string]any)
	if !ok || len(set) == 0 {
		return v
	}
	out := map[string]any{}
	for _, sel := range set {
		if field, ok := sel.(*ast.Field); ok {
			out[field.Alias] = project(m[field.Name], field.SelectionSet)
		}
	}
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
