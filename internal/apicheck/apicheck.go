// Package apicheck checks the requests a fake of a provider receives, and
// the answers it gives, against the provider's published OpenAPI 3.0
// description: the operation exists (method and path), its required
// parameters are there, its JSON body is what the description allows, and
// the answer's status and body are among those it declares. A fake built
// on it fails its test when the server sends what the provider would
// refuse, and cannot answer what the provider would not.
//
// It is for tests: the descriptions are read at test time (from npm or
// shared test data), never embedded.
package apicheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Description is an OpenAPI 3.0 description, ready to check against.
type Description struct {
	doc      map[string]any
	ops      []operation
	compiler *jsonschema.Compiler

	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema // by JSON pointer
}

type operation struct {
	method, template string
	path             *regexp.Regexp
	literals         int // literal segments: the more, the better a match
	pointer          string
	op               map[string]any
}

const resourceURL = "mem://description.json"

// Load reads a description. Its schemas are made draft-07 JSON Schemas
// (OpenAPI 3.0's nullable becomes a null type) before they are compiled.
func Load(r io.Reader) (*Description, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("the API description: %w", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.0") {
		return nil, fmt.Errorf("the API description is OpenAPI %q, not 3.0", v)
	}
	d := &Description{doc: nullables(doc).(map[string]any), schemas: map[string]*jsonschema.Schema{}}
	b, err := json.Marshal(d.doc)
	if err != nil {
		return nil, err
	}
	d.compiler = jsonschema.NewCompiler()
	d.compiler.Draft = jsonschema.Draft7
	if err := d.compiler.AddResource(resourceURL, bytes.NewReader(b)); err != nil {
		return nil, err
	}
	paths, _ := d.doc["paths"].(map[string]any)
	for tmpl, item := range paths {
		methods, _ := item.(map[string]any)
		for method, op := range methods {
			o, ok := op.(map[string]any)
			if !ok || !isMethod(method) {
				continue
			}
			re, lit := templateRE(tmpl)
			d.ops = append(d.ops, operation{method: strings.ToUpper(method), template: tmpl, path: re, literals: lit,
				pointer: "/paths/" + escape(tmpl) + "/" + method, op: o})
		}
	}
	sort.Slice(d.ops, func(i, j int) bool { return d.ops[i].literals > d.ops[j].literals })
	return d, nil
}

func isMethod(m string) bool {
	switch m {
	case "get", "put", "post", "delete", "patch", "head", "options":
		return true
	}
	return false
}

// nullables rewrites OpenAPI 3.0's nullable: true into JSON Schema: a
// null type beside the schema's type, or anyOf the schema and null.
func nullables(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = nullables(e)
		}
		if n, _ := x["nullable"].(bool); n {
			delete(x, "nullable")
			if t, ok := x["type"].(string); ok {
				x["type"] = []any{t, "null"}
			} else {
				inner := map[string]any{}
				for k, e := range x {
					inner[k] = e
				}
				return map[string]any{"anyOf": []any{inner, map[string]any{"type": "null"}}}
			}
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = nullables(e)
		}
	}
	return v
}

// escape is a JSON pointer token, URL-escaped for a fragment.
func escape(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
	return url.PathEscape(s)
}

var param = regexp.MustCompile(`\{[^}/]+\}`)

// templateRE matches a path template's paths; lit counts its literal
// segments.
func templateRE(tmpl string) (*regexp.Regexp, int) {
	lit := 0
	for _, seg := range strings.Split(tmpl, "/") {
		if seg != "" && !param.MatchString(seg) {
			lit++
		}
	}
	parts := param.Split(tmpl, -1)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, "[^/]+") + "$"), lit
}

// find is the operation of a request's method and path.
func (d *Description) find(method, path string) *operation {
	for i := range d.ops {
		if d.ops[i].method == method && d.ops[i].path.MatchString(path) {
			return &d.ops[i]
		}
	}
	return nil
}

// schema compiles the schema at a JSON pointer of the description, once.
func (d *Description) schema(pointer string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.schemas[pointer]; s != nil {
		return s, nil
	}
	s, err := d.compiler.Compile(resourceURL + "#" + pointer)
	if err != nil {
		return nil, err
	}
	d.schemas[pointer] = s
	return s, nil
}

// Problems collects what a fake saw that the description does not allow.
type Problems struct {
	mu   sync.Mutex
	list []string
	// Calls are the operations called, "METHOD template", in order.
	Calls []string
}

func (p *Problems) add(format string, args ...any) {
	p.mu.Lock()
	p.list = append(p.list, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

// Add notes a problem a fake found by itself.
func (p *Problems) Add(msg string) { p.add("%s", msg) }

// Record notes a call a fake served by itself.
func (p *Problems) Record(call string) {
	p.mu.Lock()
	p.Calls = append(p.Calls, call)
	p.mu.Unlock()
}

// List is what was found, in order.
func (p *Problems) List() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

// Called says how many times an operation ("METHOD template") was called.
func (p *Problems) Called(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.Calls {
		if c == op {
			n++
		}
	}
	return n
}

// Handler checks every request against the description before h answers
// it, and h's answer after: a request of no operation is answered 404 and
// noted; so is a body, a parameter or an answer the operation does not
// allow. prefix is the path the API is served under ("" at the root).
func (d *Description) Handler(prefix string, h http.Handler, p *Problems) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimPrefix(r.URL.Path, prefix)
		op := d.find(r.Method, path)
		if op == nil {
			p.add("%s %s: no such operation in the API description", r.Method, path)
			http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
			return
		}
		p.mu.Lock()
		p.Calls = append(p.Calls, op.method+" "+op.template)
		p.mu.Unlock()
		body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
		d.checkRequest(op, r, body, p)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		d.checkResponse(op, rec, p)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// checkRequest checks the required query and header parameters and the
// JSON body.
func (d *Description) checkRequest(op *operation, r *http.Request, body []byte, p *Problems) {
	name := op.method + " " + op.template
	params, _ := op.op["parameters"].([]any)
	for _, prm := range params {
		m := d.resolve(prm)
		if req, _ := m["required"].(bool); !req {
			continue
		}
		n, _ := m["name"].(string)
		switch m["in"] {
		case "query":
			if !r.URL.Query().Has(n) {
				p.add("%s: the required query parameter %s is missing", name, n)
			}
		case "header":
			if r.Header.Get(n) == "" {
				p.add("%s: the required header %s is missing", name, n)
			}
		}
	}
	rb := d.resolve(op.op["requestBody"])
	if rb == nil {
		if len(bytes.TrimSpace(body)) > 0 {
			p.add("%s: a body, where the operation takes none", name)
		}
		return
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if req, _ := rb["required"].(bool); req {
			p.add("%s: no body, where one is required", name)
		}
		return
	}
	ptr := op.pointer + "/requestBody/content/application~1json/schema"
	if ref, ok := rb["$ref"]; ok {
		ptr = strings.TrimPrefix(fmt.Sprint(ref), "#") + "/content/application~1json/schema"
	}
	d.validate(name+": the request's body", ptr, body, p)
}

// checkResponse checks that the answer's status is declared and its JSON
// body is what the description says.
func (d *Description) checkResponse(op *operation, rec *httptest.ResponseRecorder, p *Problems) {
	name := op.method + " " + op.template
	responses, _ := op.op["responses"].(map[string]any)
	code := strconv.Itoa(rec.Code)
	resp, ok := responses[code]
	if !ok {
		p.add("%s: the answer %d is not one the operation gives", name, rec.Code)
		return
	}
	m := d.resolve(resp)
	content, _ := m["content"].(map[string]any)
	if _, ok := content["application/json"]; !ok || rec.Body.Len() == 0 {
		return
	}
	ptr := op.pointer + "/responses/" + code + "/content/application~1json/schema"
	if ref, ok := resp.(map[string]any)["$ref"]; ok {
		ptr = strings.TrimPrefix(fmt.Sprint(ref), "#") + "/content/application~1json/schema"
	}
	d.validate(fmt.Sprintf("%s: the answer %d", name, rec.Code), ptr, rec.Body.Bytes(), p)
}

// validate checks a JSON document against the schema at a pointer.
func (d *Description) validate(what, pointer string, doc []byte, p *Problems) {
	s, err := d.schema(pointer)
	if err != nil {
		p.add("%s: the description's schema at %s: %v", what, pointer, err)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		p.add("%s is not JSON: %v", what, err)
		return
	}
	if err := s.Validate(v); err != nil {
		p.add("%s does not match the description: %v", what, err)
	}
}

// resolve follows a local $ref.
func (d *Description) resolve(v any) map[string]any {
	m, _ := v.(map[string]any)
	for i := 0; m != nil && i < 8; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		m = d.pointer(strings.TrimPrefix(ref, "#"))
	}
	return m
}

// pointer is the object at a JSON pointer of the description.
func (d *Description) pointer(ptr string) map[string]any {
	var cur any = d.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[tok]
	}
	m, _ := cur.(map[string]any)
	return m
}
