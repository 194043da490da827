package apicheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
)

// JiraOperations is an extract of Jira Cloud's REST v3 description (the
// comment operations and the Comment schema, as the shared API descriptions
// hold it): each operation's parameters, whether it takes a body, its
// answers.
type JiraOperations struct {
	Operations map[string]JiraOperation `json:"operations"`
	Schemas    map[string]struct {
		Properties map[string]struct {
			ReadOnly bool `json:"readOnly"`
		} `json:"properties"`
	} `json:"schemas"`
}

// JiraOperation is one operation ("POST /rest/api/3/issue/{issueIdOrKey}/comment").
type JiraOperation struct {
	Parameters    []JiraParameter `json:"parameters"`
	RequestBody   bool            `json:"requestBody"`
	RequestSchema *struct {
		Ref string `json:"$ref"`
	} `json:"requestSchema"`
	Responses []string `json:"responses"`
}

// JiraParameter is a parameter of an operation.
type JiraParameter struct {
	Name     string `json:"name"`
	In       string `json:"in"`
	Required bool   `json:"required"`
}

// LoadJira reads the extract.
func LoadJira(r io.Reader) (*JiraOperations, error) {
	var d JiraOperations
	if err := json.NewDecoder(r).Decode(&d); err != nil {
		return nil, fmt.Errorf("the Jira description: %w", err)
	}
	return &d, nil
}

var jiraParam = regexp.MustCompile(`\{[^}/]+\}`)

// find is the operation of a method and path, with its template.
func (d *JiraOperations) find(method, path string) (string, *JiraOperation) {
	for key, op := range d.Operations {
		m, tmpl, _ := strings.Cut(key, " ")
		if m == method && regexp.MustCompile(jiraParamRE(tmpl)).MatchString(path) {
			return key, &op
		}
	}
	return "", nil
}

func jiraParamRE(tmpl string) string {
	parts := jiraParam.Split(tmpl, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return "^" + strings.Join(parts, "[^/]+") + "$"
}

// Handler checks every request against the extract before h answers it:
// the operation exists, it is authenticated (basic auth), its query
// parameters are its own, its body is given when it takes one and sets no
// read-only field of its schema, and body (a comment's, in Atlassian
// Document Format) validates against adf; and after, that the answer's
// status is one the operation gives.
func (d *JiraOperations) Handler(h http.Handler, adf *Schema, p *Problems) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, op := d.find(r.Method, r.URL.Path)
		if op == nil {
			p.add("%s %s: no such operation in the Jira description", r.Method, r.URL.Path)
			http.Error(w, `{"errorMessages":["not found"]}`, http.StatusNotFound)
			return
		}
		p.Record(key)
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		d.checkRequest(key, op, r, body, adf, p)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if !slices.Contains(op.Responses, fmt.Sprint(rec.Code)) {
			p.add("%s: the answer %d is not one the operation gives", key, rec.Code)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func (d *JiraOperations) checkRequest(key string, op *JiraOperation, r *http.Request, body []byte, adf *Schema, p *Problems) {
	if _, _, ok := r.BasicAuth(); !ok {
		p.add("%s: no basic authentication (an account's e-mail and API token)", key)
	}
	for k := range r.URL.Query() {
		if !slices.ContainsFunc(op.Parameters, func(prm JiraParameter) bool { return prm.In == "query" && prm.Name == k }) {
			p.add("%s: query parameter %s is not one of the operation's", key, k)
		}
	}
	if !op.RequestBody {
		if len(bytes.TrimSpace(body)) > 0 {
			p.add("%s: a body, where the operation takes none", key)
		}
		return
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		p.add("%s: the body is not a JSON object: %v", key, err)
		return
	}
	if op.RequestSchema != nil {
		schema := d.Schemas[strings.TrimPrefix(op.RequestSchema.Ref, "#/components/schemas/")]
		for field := range doc {
			prop, known := schema.Properties[field]
			switch {
			case !known:
				p.add("%s: the body's field %s is not one of the schema's", key, field)
			case prop.ReadOnly:
				p.add("%s: the body sets %s, which is read-only", key, field)
			}
		}
	}
	if b, ok := doc["body"]; ok && adf != nil {
		if err := adf.Validate(b); err != nil {
			p.add("%s: the body's body is not Atlassian Document Format: %v", key, err)
		}
	}
}
