// Package gitlabtest is a fake GitLab for tests, on loopback: projects
// served over git's smart HTTP (cloned from, pushed to), issue and merge
// request notes, award emoji, merge requests (and their diffs) and commit
// statuses, through the REST API v4. Every request is checked against
// GitLab's documented shape of its endpoint (docs.gitlab.com/api: notes,
// award_emoji, merge_requests, commits, projects): the method and path,
// the token, the required attributes and their types, no attribute the
// endpoint does not take; and every answer carries the attributes the
// documentation shows. A test fails on anything else.
package gitlabtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"factory/internal/codehost/gitserver"
)

// Fake is a GitLab on loopback.
type Fake struct {
	URL   string // the instance's address (the API is URL/api/v4)
	Token string // the access token it takes

	t       testing.TB
	gitRoot string

	mu       sync.Mutex
	problems []string
	nextID   int64
	projects map[string]*Project // by path
	Notes    []*Note
	Awards   []Award
	MRs      []*MergeRequest
	Statuses []Status
	mrFiles  map[string][]MRFile // by project path!iid
	failing  bool
	calls    map[string]int // by "METHOD /documented/path"
}

// Project is a project of the fake.
type Project struct {
	ID            int64
	Path          string
	DefaultBranch string
	Dir           string
}

// Note is a note on an issue or merge request.
type Note struct {
	ID       int64
	Project  string
	Noteable string // Issue or MergeRequest
	IID      int
	Body     string
	Edits    int
}

// Award is an award emoji: on an issue or merge request (Note 0) or a note.
type Award struct {
	Project, Noteable, Name string
	IID                     int
	Note                    int64
}

// MergeRequest is a merge request.
type MergeRequest struct {
	IID            int
	Project, Title string
	Source, Target string
	State          string
	Draft          bool
	WebURL         string
}

// Status is a commit status.
type Status struct {
	Project, SHA, State, Name, Description string
}

// New starts a fake GitLab; the test fails, when it ends, on every problem
// the fake saw.
func New(t testing.TB) *Fake {
	t.Helper()
	f := &Fake{Token: "glpat-fake-token-for-tests", t: t, gitRoot: t.TempDir(), nextID: 5000, projects: map[string]*Project{}}
	mux := http.NewServeMux()
	mux.Handle("/git/", gitserver.Handler(t, f.gitRoot, func(user, pass, repo string) bool { return pass == f.Token && f.project(repo) != nil }))
	mux.HandleFunc("/api/v4/", f.api)
	srv := httptest.NewServer(mux)
	f.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		for _, p := range f.Problems() {
			t.Errorf("fake GitLab: %s", p)
		}
	})
	return f
}

// Called says how many requests an endpoint ("GET /projects/:id") answered.
func (f *Fake) Called(endpoint string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[endpoint]
}

// Problems are the requests the fake saw that GitLab would refuse.
func (f *Fake) Problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.problems...)
}

func (f *Fake) problem(format string, args ...any) {
	f.mu.Lock()
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// AddProject makes a project (group/.../name) with one commit on main.
func (f *Fake) AddProject(path string, files map[string]string) *Project {
	f.t.Helper()
	dir := filepath.Join(f.gitRoot, filepath.FromSlash(path)+".git")
	gitserver.Seed(f.t, dir, files)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	p := &Project{ID: f.nextID, Path: path, DefaultBranch: "main", Dir: dir}
	f.projects[path] = p
	return p
}

func (f *Fake) project(path string) *Project {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.projects[path]
}

// Head is the commit a branch of a project points at.
func (f *Fake) Head(path, branch string) string {
	p := f.project(path)
	if p == nil {
		return ""
	}
	return gitserver.Head(p.Dir, branch)
}

// Snapshot runs fn with the fake's state held still.
func (f *Fake) Snapshot(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// endpoint is one documented endpoint: its method, path (with :params),
// the attributes it takes (name → JSON type), those it requires.
type endpoint struct {
	method, path string
	re           *regexp.Regexp
	takes        map[string]string
	required     []string
	handle       func(f *Fake, w http.ResponseWriter, p *Project, params []string, in map[string]any)
}

var param = regexp.MustCompile(`:[a-z_]+`)

func ep(method, path string, takes map[string]string, required []string, h func(*Fake, http.ResponseWriter, *Project, []string, map[string]any)) endpoint {
	return endpoint{method: method, path: path, re: regexp.MustCompile("^" + param.ReplaceAllString(path, "([^/]+)") + "$"),
		takes: takes, required: required, handle: h}
}

// api routes a request of the REST API v4 to its documented endpoint,
// checking it first.
func (f *Fake) api(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.EscapedPath(), "/api/v4")
	if r.Header.Get("PRIVATE-TOKEN") != f.Token && r.Header.Get("Authorization") != "Bearer "+f.Token {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "401 Unauthorized"})
		return
	}
	for _, e := range endpoints {
		m := e.re.FindStringSubmatch(path)
		if m == nil || e.method != r.Method {
			continue
		}
		params := m[1:]
		id, _ := url.PathUnescape(params[0])
		p := f.projectByID(id)
		if p == nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Project Not Found"})
			return
		}
		in := f.attributes(r, e)
		f.mu.Lock()
		if f.calls == nil {
			f.calls = map[string]int{}
		}
		f.calls[e.method+" "+e.path]++
		f.mu.Unlock()
		e.handle(f, w, p, params[1:], in)
		return
	}
	f.problem("%s %s: no such endpoint in GitLab's API", r.Method, path)
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Not Found"})
}

// projectByID is a project by its ID or URL-encoded path, as GitLab takes
// either.
func (f *Fake) projectByID(id string) *Project {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.projects[id]; p != nil {
		return p
	}
	for _, p := range f.projects {
		if strconv.FormatInt(p.ID, 10) == id {
			return p
		}
	}
	return nil
}

// attributes reads a request's attributes (its JSON body, or its query)
// and checks them against the endpoint's documentation.
func (f *Fake) attributes(r *http.Request, e endpoint) map[string]any {
	in := map[string]any{}
	if b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20)); len(b) > 0 {
		if err := json.Unmarshal(b, &in); err != nil {
			f.problem("%s %s: the body is not JSON: %v", e.method, e.path, err)
		}
	}
	for k, v := range r.URL.Query() {
		if len(v) > 0 {
			in[k] = v[0]
		}
	}
	for k, v := range in {
		typ, ok := e.takes[k]
		if !ok {
			f.problem("%s %s: %q is not an attribute the endpoint takes", e.method, e.path, k)
			continue
		}
		if !hasType(v, typ) {
			f.problem("%s %s: %q is %T, documented as %s", e.method, e.path, k, v, typ)
		}
	}
	for _, k := range e.required {
		if s, _ := in[k].(string); s == "" {
			f.problem("%s %s: the required attribute %q is missing", e.method, e.path, k)
		}
	}
	return in
}

func hasType(v any, typ string) bool {
	switch typ {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		_, isStr := v.(string) // in a query
		return ok || isStr
	case "integer":
		_, ok := v.(float64)
		_, isStr := v.(string)
		return ok || isStr
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }
