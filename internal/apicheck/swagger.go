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

// Swagger is a Swagger 2.0 description's paths and definitions (the Bot
// Framework Connector's, as the shared API descriptions hold it): each
// operation's parameters and answers; bodies are checked against the
// definitions, compiled as the JSON Schema (draft 4) they are.
type Swagger struct {
	Paths map[string]map[string]SwaggerOperation `json:"paths"`
	raw   []byte
}

// SwaggerOperation is one operation.
type SwaggerOperation struct {
	OperationID string `json:"operationId"`
	Parameters  []struct {
		Name     string `json:"name"`
		In       string `json:"in"`
		Required bool   `json:"required"`
	} `json:"parameters"`
	Responses []string `json:"responses"`
}

// LoadSwagger reads a description.
func LoadSwagger(r io.Reader) (*Swagger, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var d Swagger
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("the Swagger description: %w", err)
	}
	d.raw = b
	return &d, nil
}

// Definition compiles a definition (Activity) as a JSON Schema.
func (d *Swagger) Definition(name string) (*Schema, error) {
	doc := map[string]any{}
	if err := json.Unmarshal(d.raw, &doc); err != nil {
		return nil, err
	}
	// The definitions alone, as a draft-4 document their $refs resolve in.
	b, _ := json.Marshal(map[string]any{"$schema": "http://json-schema.org/draft-04/schema#", "definitions": doc["definitions"]})
	return LoadSchema(bytes.NewReader(b), "swagger.json", "/definitions/"+name)
}

// Handler checks every request against the description before h answers
// it (under prefix): the operation exists, its body parameter is given and
// is what its definition (bodies[operationId]) allows, a bearer token
// comes; and after, that the answer's status is one the operation gives.
func (d *Swagger) Handler(prefix string, h http.Handler, bodies map[string]*Schema, p *Problems) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, prefix)
		op, tmpl := d.find(r.Method, path)
		if op == nil {
			p.add("%s %s: no such operation in the description", r.Method, path)
			http.Error(w, `{"error":{"code":"NotFound"}}`, http.StatusNotFound)
			return
		}
		name := op.OperationID
		p.Record(name)
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			p.add("%s: no bearer token", name)
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		for _, prm := range op.Parameters {
			if prm.In != "body" {
				continue
			}
			switch s := bodies[name]; {
			case len(bytes.TrimSpace(body)) == 0 && prm.Required:
				p.add("%s: no body, where %s is required", name, prm.Name)
			case s != nil:
				if err := s.Validate(body); err != nil {
					p.add("%s: the body is not a %s: %v", name, prm.Name, err)
				}
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if !slices.Contains(op.Responses, fmt.Sprint(rec.Code)) && !slices.Contains(op.Responses, "default") {
			p.add("%s %s: the answer %d is not one the operation gives", name, tmpl, rec.Code)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func (d *Swagger) find(method, path string) (*SwaggerOperation, string) {
	best, bestLit := "", -1
	var found *SwaggerOperation
	for tmpl, ops := range d.Paths {
		op, ok := ops[strings.ToLower(method)]
		if !ok || !regexp.MustCompile(jiraParamRE(tmpl)).MatchString(path) {
			continue
		}
		if lit := strings.Count(tmpl, "/") - strings.Count(tmpl, "{"); lit > bestLit {
			o := op
			found, best, bestLit = &o, tmpl, lit
		}
	}
	return found, best
}
