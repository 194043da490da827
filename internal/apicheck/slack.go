package apicheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// SlackMethods is Slack's Web API description as slackapi/slack-api-specs
// publishes it (reduced to each method's parameters and content types):
// what a request to a method may carry.
type SlackMethods struct {
	Methods map[string]SlackMethod `json:"methods"`
}

// SlackMethod is one Web API method.
type SlackMethod struct {
	Consumes []string     `json:"consumes"`
	HTTP     string       `json:"http"`
	Params   []SlackParam `json:"params"`
}

// SlackParam is one parameter of a method: its name, where it goes
// (header: the token as Authorization: Bearer; query; formData), whether
// it is required, and its type.
type SlackParam struct {
	In       string `json:"in"`
	Name     string `json:"name"`
	Required bool   `json:"required"`
	Type     string `json:"type"`
}

// LoadSlack reads the description.
func LoadSlack(r io.Reader) (*SlackMethods, error) {
	var d SlackMethods
	if err := json.NewDecoder(r).Decode(&d); err != nil {
		return nil, fmt.Errorf("the Slack Web API description: %w", err)
	}
	if len(d.Methods) == 0 {
		return nil, fmt.Errorf("the Slack Web API description lists no method")
	}
	return &d, nil
}

// Handler checks every request to /api/<method> against the description
// before h answers it: the method exists; it is called with its HTTP method
// or, as Slack takes every method, by POST with a form; its content type is
// one it consumes; the token comes (Authorization: Bearer, or the token
// parameter); every required parameter is there, every parameter sent is
// one of its own and of its type. Anything else is noted in p, and a
// method the description lacks is answered {"ok":false,"error":"unknown_method"}.
func (d *SlackMethods) Handler(h http.Handler, p *Problems) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/api/")
		m, ok := d.Methods[name]
		if !ok {
			p.add("%s %s: no such method in the Slack Web API description", r.Method, r.URL.Path)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"ok":false,"error":"unknown_method"}`))
			return
		}
		p.mu.Lock()
		p.Calls = append(p.Calls, name)
		p.mu.Unlock()
		body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		d.check(name, m, r, body, p)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// check checks one request to a method.
func (d *SlackMethods) check(name string, m SlackMethod, r *http.Request, body []byte, p *Problems) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	form := ct == "application/x-www-form-urlencoded"
	switch {
	case r.Method == m.HTTP:
	case r.Method == http.MethodPost && form && slices.Contains(m.Consumes, ct):
	default:
		p.add("%s: called by %s (%s); the description says %s", name, r.Method, ct, m.HTTP)
	}
	if len(body) > 0 && !slices.Contains(m.Consumes, ct) {
		p.add("%s: a body of %q, which it does not consume (%s)", name, ct, strings.Join(m.Consumes, ", "))
	}
	values := r.URL.Query()
	if form {
		posted, err := url.ParseQuery(string(body))
		if err != nil {
			p.add("%s: the form does not parse: %v", name, err)
		}
		for k, v := range posted {
			values[k] = append(values[k], v...)
		}
	}
	bearer := strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ")
	for _, prm := range m.Params {
		has := values.Has(prm.Name) || prm.Name == "token" && bearer
		if prm.Required && !has {
			p.add("%s: the required parameter %s is missing", name, prm.Name)
		}
		if v := values.Get(prm.Name); has && v != "" && !slackTyped(prm.Type, v) {
			p.add("%s: parameter %s is %q, not a %s", name, prm.Name, v, prm.Type)
		}
	}
	for k := range values {
		if !slices.ContainsFunc(m.Params, func(prm SlackParam) bool { return prm.Name == k }) {
			p.add("%s: parameter %s is not one of the method's", name, k)
		}
	}
}

func slackTyped(typ, v string) bool {
	switch typ {
	case "boolean":
		_, err := strconv.ParseBool(v)
		return err == nil
	case "integer":
		_, err := strconv.Atoi(v)
		return err == nil
	case "number":
		_, err := strconv.ParseFloat(v, 64)
		return err == nil
	}
	return true
}
