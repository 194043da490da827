// Package githubtest is a fake GitHub for tests, on loopback: a GitHub App
// (its installations, tokens), repositories served over git's smart HTTP
// (Debian's git http-backend, behind net/http/cgi) that a run clones from
// and pushes to, issue comments, reactions, pull requests (and the files
// they change) and check runs. Every request it receives and every answer
// it gives is checked against GitHub's published OpenAPI description
// (@octokit/openapi, installed from npm at test time); its answers are
// GitHub's own examples with what it must changed. A test fails on
// anything the description does not allow.
package githubtest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"factory/internal/apicheck"
	"factory/internal/testnpm"
)

// OpenAPIVersion is the @octokit/openapi release the fake checks against.
const OpenAPIVersion = "23.0.2"

var (
	descOnce sync.Once
	desc     *apicheck.Description
	descErr  error
)

// Description is GitHub's OpenAPI description, loaded once per test binary.
func Description(t testing.TB) *apicheck.Description {
	t.Helper()
	dir := testnpm.Package(t, "@octokit/openapi", OpenAPIVersion)
	descOnce.Do(func() {
		f, err := os.Open(filepath.Join(dir, "generated", "api.github.com.json"))
		if err != nil {
			descErr = err
			return
		}
		defer f.Close()
		desc, descErr = apicheck.Load(f)
	})
	if descErr != nil {
		t.Fatal(descErr)
	}
	return desc
}

// Fake is a GitHub on loopback.
type Fake struct {
	URL        string // the API's base URL
	AppID      int64
	PrivateKey []byte // the App's key, PEM
	Problems   *apicheck.Problems

	t       testing.TB
	desc    *apicheck.Description
	key     *rsa.PrivateKey
	gitRoot string

	mu            sync.Mutex
	nextID        int64
	installations map[string]int64 // by owner
	repos         map[string]*Repo // by owner/name
	tokens        map[string]*Token
	Comments      []*Comment
	Reactions     []Reaction
	Pulls         []*Pull
	Checks        []*CheckRun
	gitRequests   []string
	pullFiles     map[string][]PullFile // by owner/name#number
	unavailable   bool
}

// Repo is a repository of the fake, served over git's smart HTTP.
type Repo struct {
	Owner, Name, DefaultBranch string
	Dir                        string // the bare repository
}

// Token is an installation token the fake minted.
type Token struct {
	Value        string
	Owner        string
	Repositories []string
	Permissions  map[string]string
	Expires      time.Time
}

// Comment is an issue or pull request comment.
type Comment struct {
	ID     int64
	Repo   string
	Number int
	Body   string
	Edits  int
}

// Reaction is a reaction the fake was asked for: on an issue ("issue",
// ID its number), an issue comment ("comment") or a review comment.
type Reaction struct {
	Repo, On, Content string
	ID                int64
}

// Pull is a pull request.
type Pull struct {
	Number                   int
	Repo, Head, Base, Title  string
	Body                     string
	State                    string
	Draft, Merged            bool
	HTMLURL                  string
	CreatedBy, TokenReceived string
}

// CheckRun is a check run, with every annotation it was given.
type CheckRun struct {
	ID                                              int64
	Repo, Name, HeadSHA, Conclusion, Title, Summary string
	Annotations                                     []map[string]any
}

// New starts a fake GitHub; it stops, and the test fails on every problem
// its requests and answers had, when the test ends.
func New(t testing.TB) *Fake {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	f := &Fake{AppID: 4242, PrivateKey: pemKey, Problems: &apicheck.Problems{}, t: t, desc: Description(t), key: key,
		gitRoot: t.TempDir(), nextID: 1000, installations: map[string]int64{}, repos: map[string]*Repo{}, tokens: map[string]*Token{}}
	mux := http.NewServeMux()
	f.routes(mux)
	api := f.desc.Handler("", mux, f.Problems)
	root := http.NewServeMux()
	root.Handle("/git/", f.gitHandler())
	root.Handle("/", api)
	srv := httptest.NewServer(root)
	f.URL = srv.URL
	t.Cleanup(func() {
		srv.Close()
		for _, p := range f.Problems.List() {
			t.Errorf("fake GitHub: %s", p)
		}
	})
	return f
}

// AddRepo makes a repository with one commit on its default branch
// (main) holding files, and installs the App on its owner.
func (f *Fake) AddRepo(owner, name string, files map[string]string) *Repo {
	f.t.Helper()
	dir := filepath.Join(f.gitRoot, owner, name+".git")
	seed(f.t, dir, files)
	r := &Repo{Owner: owner, Name: name, DefaultBranch: "main", Dir: dir}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repos[owner+"/"+name] = r
	if _, ok := f.installations[owner]; !ok {
		f.installations[owner] = f.id()
	}
	return r
}

// CloneURL is where a repository of the fake is cloned from.
func (f *Fake) CloneURL(owner, name string) string {
	return f.URL + "/git/" + owner + "/" + name + ".git"
}

func (f *Fake) id() int64 { f.nextID++; return f.nextID }

// TokensMinted are the installation tokens minted so far.
func (f *Fake) TokensMinted() []Token {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Token, 0, len(f.tokens))
	for _, tk := range f.tokens {
		out = append(out, *tk)
	}
	return out
}

// UserToken makes a person's token (as a fine-grained personal access
// token is) that reaches every repository of an owner for an hour.
func (f *Fake) UserToken(owner string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := fmt.Sprintf("github_pat_%d_%s", f.id(), owner)
	f.tokens[v] = &Token{Value: v, Owner: owner, Expires: time.Now().Add(time.Hour)}
	return v
}

// Snapshot runs fn with the fake's state held still.
func (f *Fake) Snapshot(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

// appJWT checks the App's JSON Web Token (RS256, signed with its key, iss
// the App's ID, not expired).
func (f *Fake) appJWT(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(&f.key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		return false
	}
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct {
		Iss any   `json:"iss"`
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(body, &claims) != nil || fmt.Sprint(claims.Iss) != strconv.FormatInt(f.AppID, 10) {
		return false
	}
	return time.Now().Unix() < claims.Exp
}

// installationToken is the valid installation token a request carries,
// for a repository it may reach.
func (f *Fake) installationToken(r *http.Request, owner, repo string) *Token {
	h := r.Header.Get("Authorization")
	v, ok := strings.CutPrefix(h, "token ")
	if !ok {
		v, _ = strings.CutPrefix(h, "Bearer ")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	tk := f.tokens[v]
	if tk == nil || time.Now().After(tk.Expires) || tk.Owner != owner {
		return nil
	}
	if len(tk.Repositories) > 0 && repo != "" {
		found := false
		for _, n := range tk.Repositories {
			found = found || n == repo
		}
		if !found {
			return nil
		}
	}
	return tk
}

// writeJSON answers with a status and a JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"message": msg, "documentation_url": "https://docs.github.com/rest", "status": strconv.Itoa(status)})
}
