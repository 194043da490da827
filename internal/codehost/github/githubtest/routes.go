package githubtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (f *Fake) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /repos/{owner}/{repo}/installation", f.getInstallation)
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", f.createToken)
	mux.HandleFunc("GET /repos/{owner}/{repo}", f.getRepo)
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/{number}/comments", f.createComment)
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/issues/comments/{id}", f.editComment)
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/comments/{id}/reactions", f.react("comment"))
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/{number}/reactions", f.react("issue"))
	mux.HandleFunc("POST /repos/{owner}/{repo}/pulls/comments/{id}/reactions", f.react("review_comment"))
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls", f.listPulls)
	mux.HandleFunc("POST /repos/{owner}/{repo}/pulls", f.createPull)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{pull_number}/files", f.listPullFiles)
	mux.HandleFunc("POST /repos/{owner}/{repo}/check-runs", f.createCheck)
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/check-runs/{id}", f.updateCheck)
}

func (f *Fake) getInstallation(w http.ResponseWriter, r *http.Request) {
	if !f.appJWT(r) {
		fail(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return
	}
	owner := r.PathValue("owner")
	f.mu.Lock()
	id, ok := f.installations[owner]
	_, repo := f.repos[owner+"/"+r.PathValue("repo")]
	f.mu.Unlock()
	if !ok || !repo {
		fail(w, http.StatusNotFound, "Not Found")
		return
	}
	ex := f.desc.ExampleObject("GET", "/repos/{owner}/{repo}/installation", 200)
	ex["id"], ex["app_id"] = id, f.AppID
	if acc, ok := ex["account"].(map[string]any); ok {
		acc["login"] = owner
	}
	writeJSON(w, http.StatusOK, ex)
}

func (f *Fake) createToken(w http.ResponseWriter, r *http.Request) {
	if !f.appJWT(r) {
		fail(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var req struct {
		Repositories []string          `json:"repositories"`
		Permissions  map[string]string `json:"permissions"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	owner := ""
	for o, i := range f.installations {
		if i == id {
			owner = o
		}
	}
	for _, name := range req.Repositories {
		if f.repos[owner+"/"+name] == nil {
			owner = ""
		}
	}
	if owner == "" {
		f.mu.Unlock()
		fail(w, http.StatusUnprocessableEntity, "There is at least one repository that does not exist or is not accessible to the parent installation.")
		return
	}
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	tk := &Token{Value: "ghs_" + hex.EncodeToString(b), Owner: owner, Repositories: req.Repositories, Permissions: req.Permissions,
		Expires: time.Now().Add(time.Hour).UTC().Truncate(time.Second)}
	f.tokens[tk.Value] = tk
	f.mu.Unlock()
	ex := f.desc.ExampleObject("POST", "/app/installations/{installation_id}/access_tokens", 201)
	ex["token"], ex["expires_at"] = tk.Value, tk.Expires.Format(time.RFC3339)
	ex["repository_selection"] = "selected"
	delete(ex, "repositories") // the example's are full repository records: not needed
	if req.Permissions != nil {
		ex["permissions"] = req.Permissions
	}
	writeJSON(w, http.StatusCreated, ex)
}

// repoFor is the repository a request names, if its token reaches it.
func (f *Fake) repoFor(w http.ResponseWriter, r *http.Request) (*Repo, *Token) {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	tk := f.installationToken(r, owner, name)
	if tk == nil {
		fail(w, http.StatusUnauthorized, "Bad credentials")
		return nil, nil
	}
	f.mu.Lock()
	repo := f.repos[owner+"/"+name]
	f.mu.Unlock()
	if repo == nil {
		fail(w, http.StatusNotFound, "Not Found")
		return nil, nil
	}
	return repo, tk
}

func (f *Fake) getRepo(w http.ResponseWriter, r *http.Request) {
	repo, _ := f.repoFor(w, r)
	if repo == nil {
		return
	}
	ex := f.desc.ExampleObject("GET", "/repos/{owner}/{repo}", 200)
	full := repo.Owner + "/" + repo.Name
	ex["name"], ex["full_name"], ex["default_branch"] = repo.Name, full, repo.DefaultBranch
	ex["clone_url"], ex["html_url"] = f.CloneURL(repo.Owner, repo.Name), f.URL+"/"+full
	// The schema requires language of a repository, its parent and its
	// source; GitHub's own example leaves it out.
	for _, r := range []any{ex, ex["parent"], ex["source"]} {
		if m, ok := r.(map[string]any); ok {
			if _, has := m["language"]; !has {
				m["language"] = nil
			}
		}
	}
	if o, ok := ex["owner"].(map[string]any); ok {
		o["login"] = repo.Owner
	}
	writeJSON(w, http.StatusOK, ex)
}

func (f *Fake) createComment(w http.ResponseWriter, r *http.Request) {
	repo, _ := f.repoFor(w, r)
	if repo == nil {
		return
	}
	var req struct {
		Body string `json:"body"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	n, _ := strconv.Atoi(r.PathValue("number"))
	f.mu.Lock()
	c := &Comment{ID: f.id(), Repo: repo.Owner + "/" + repo.Name, Number: n, Body: req.Body}
	f.Comments = append(f.Comments, c)
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, f.commentJSON(c))
}

func (f *Fake) commentJSON(c *Comment) map[string]any {
	ex := f.desc.ExampleObject("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", 201)
	ex["id"], ex["body"] = c.ID, c.Body
	ex["html_url"] = fmt.Sprintf("%s/%s/issues/%d#issuecomment-%d", f.URL, c.Repo, c.Number, c.ID)
	ex["url"] = fmt.Sprintf("%s/repos/%s/issues/comments/%d", f.URL, c.Repo, c.ID)
	return ex
}

func (f *Fake) editComment(w http.ResponseWriter, r *http.Request) {
	repo, _ := f.repoFor(w, r)
	if repo == nil {
		return
	}
	var req struct {
		Body string `json:"body"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	f.mu.Lock()
	var c *Comment
	for _, x := range f.Comments {
		if x.ID == id && x.Repo == repo.Owner+"/"+repo.Name {
			c = x
		}
	}
	if c != nil {
		c.Body, c.Edits = req.Body, c.Edits+1
	}
	f.mu.Unlock()
	if c == nil {
		fail(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, f.commentJSON(c))
}

func (f *Fake) react(on string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		repo, _ := f.repoFor(w, r)
		if repo == nil {
			return
		}
		var req struct {
			Content string `json:"content"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if on == "issue" {
			id, _ = strconv.ParseInt(r.PathValue("number"), 10, 64)
		}
		f.mu.Lock()
		f.Reactions = append(f.Reactions, Reaction{Repo: repo.Owner + "/" + repo.Name, On: on, ID: id, Content: req.Content})
		f.mu.Unlock()
		ex := f.desc.ExampleObject("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", 201)
		ex["content"] = req.Content
		writeJSON(w, http.StatusCreated, ex)
	}
}

func (f *Fake) listPulls(w http.ResponseWriter, r *http.Request) {
	repo, _ := f.repoFor(w, r)
	if repo == nil {
		return
	}
	head := r.URL.Query().Get("head")
	if _, branch, ok := strings.Cut(head, ":"); ok {
		head = branch
	}
	state := r.URL.Query().Get("state")
	out := []any{}
	f.mu.Lock()
	for _, p := range f.Pulls {
		if p.Repo != repo.Owner+"/"+repo.Name || head != "" && p.Head != head || state != "all" && state != "" && p.State != state {
			continue
		}
		out = append(out, f.pullJSON(p, "GET", 200))
	}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// pullJSON is a pull request as GitHub's example of the operation's answer
// is, with the pull's own fields.
func (f *Fake) pullJSON(p *Pull, method string, status int) map[string]any {
	ex := f.desc.Example(method, "/repos/{owner}/{repo}/pulls", status)
	if list, ok := ex.([]any); ok && len(list) > 0 {
		ex = list[0]
	}
	m, _ := ex.(map[string]any)
	m["number"], m["title"], m["state"], m["draft"], m["html_url"] = p.Number, p.Title, p.State, p.Draft, p.HTMLURL
	if p.Merged {
		m["merged_at"] = time.Now().UTC().Format(time.RFC3339)
	} else {
		m["merged_at"] = nil
	}
	// A pull request of the fake has no reviewers asked (GitHub's example
	// names a team without the type its schema requires).
	m["requested_teams"], m["requested_reviewers"] = []any{}, []any{}
	if h, ok := m["head"].(map[string]any); ok {
		h["ref"] = p.Head
	}
	if b, ok := m["base"].(map[string]any); ok {
		b["ref"] = p.Base
	}
	return m
}

func (f *Fake) createPull(w http.ResponseWriter, r *http.Request) {
	repo, tk := f.repoFor(w, r)
	if repo == nil {
		return
	}
	var req struct {
		Title, Head, Base, Body string
		Draft                   bool
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if _, branch, ok := strings.Cut(req.Head, ":"); ok {
		req.Head = branch
	}
	if !hasBranch(repo.Dir, req.Head) {
		fail(w, http.StatusUnprocessableEntity, "Validation Failed: head "+req.Head+" does not exist")
		return
	}
	f.mu.Lock()
	for _, p := range f.Pulls {
		if p.Repo == repo.Owner+"/"+repo.Name && p.Head == req.Head && p.State == "open" {
			f.mu.Unlock()
			fail(w, http.StatusUnprocessableEntity, "Validation Failed: A pull request already exists for "+repo.Owner+":"+req.Head+".")
			return
		}
	}
	n := len(f.Pulls) + 1
	p := &Pull{Number: n, Repo: repo.Owner + "/" + repo.Name, Head: req.Head, Base: req.Base, Title: req.Title, Body: req.Body, State: "open",
		Draft: req.Draft, HTMLURL: fmt.Sprintf("%s/%s/%s/pull/%d", f.URL, repo.Owner, repo.Name, n), TokenReceived: tk.Value}
	f.Pulls = append(f.Pulls, p)
	out := f.pullJSON(p, "POST", 201)
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

// SetPull changes a pull request as GitHub would on a close or merge.
func (f *Fake) SetPull(number int, state string, merged bool) *Pull {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.Pulls {
		if p.Number == number {
			p.State, p.Merged = state, merged
			return p
		}
	}
	return nil
}

func (f *Fake) createCheck(w http.ResponseWriter, r *http.Request) {
	repo, _ := f.repoFor(w, r)
	if repo == nil {
		return
	}
	var req struct {
		Name       string `json:"name"`
		HeadSHA    string `json:"head_sha"`
		Conclusion string `json:"conclusion"`
		Output     *struct {
			Title, Summary string
			Annotations    []map[string]any
		} `json:"output"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	f.mu.Lock()
	c := &CheckRun{ID: f.id(), Repo: repo.Owner + "/" + repo.Name, Name: req.Name, HeadSHA: req.HeadSHA, Conclusion: req.Conclusion}
	if req.Output != nil {
		c.Title, c.Summary, c.Annotations = req.Output.Title, req.Output.Summary, req.Output.Annotations
	}
	f.Checks = append(f.Checks, c)
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, f.checkJSON(c, "POST", "/repos/{owner}/{repo}/check-runs", 201))
}

func (f *Fake) checkJSON(c *CheckRun, method, tmpl string, status int) map[string]any {
	ex := f.desc.ExampleObject(method, tmpl, status)
	ex["id"], ex["name"], ex["head_sha"], ex["conclusion"], ex["status"] = c.ID, c.Name, c.HeadSHA, c.Conclusion, "completed"
	return ex
}

func (f *Fake) updateCheck(w http.ResponseWriter, r *http.Request) {
	repo, _ := f.repoFor(w, r)
	if repo == nil {
		return
	}
	var req struct {
		Output *struct {
			Annotations []map[string]any
		} `json:"output"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	f.mu.Lock()
	var c *CheckRun
	for _, x := range f.Checks {
		if x.ID == id {
			c = x
		}
	}
	if c != nil && req.Output != nil {
		c.Annotations = append(c.Annotations, req.Output.Annotations...)
	}
	f.mu.Unlock()
	if c == nil {
		fail(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, f.checkJSON(c, "PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}", 200))
}
