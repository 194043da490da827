package githubtest

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// PullFile is a file a pull request changes: its path, GitHub's status of
// it (added, removed, modified, renamed, ...; "" is modified), and the
// path it had before, for a renamed one.
type PullFile struct {
	Name, Status, Previous string
}

// maxPullFiles is the most files GitHub lists of a pull request.
const maxPullFiles = 3000

// SetPullFiles sets the files a pull request of a repository ("owner/name")
// changes: GET /repos/{owner}/{repo}/pulls/{pull_number}/files lists them,
// paged, 3,000 at most, as GitHub does. A pull request whose files were
// not set changes none.
func (f *Fake) SetPullFiles(repo string, number int, files []PullFile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pullFiles == nil {
		f.pullFiles = map[string][]PullFile{}
	}
	f.pullFiles[fmt.Sprintf("%s#%d", repo, number)] = files
}

// SetUnavailable makes the pull request files endpoint answer 503, as
// GitHub does when it cannot (or, false, answer again).
func (f *Fake) SetUnavailable(down bool) {
	f.mu.Lock()
	f.unavailable = down
	f.mu.Unlock()
}

// listPullFiles answers a page of a pull request's files: per_page (30 by
// default, 100 at most) from page (1 by default), with GitHub's Link
// header to the next and last pages.
func (f *Fake) listPullFiles(w http.ResponseWriter, r *http.Request) {
	repo, _ := f.repoFor(w, r)
	if repo == nil {
		return
	}
	f.mu.Lock()
	down := f.unavailable
	files := f.pullFiles[repo.Owner+"/"+repo.Name+"#"+r.PathValue("pull_number")]
	f.mu.Unlock()
	if down {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"code": "unavailable", "message": "Service unavailable",
			"documentation_url": "https://docs.github.com/rest"})
		return
	}
	files = files[:min(len(files), maxPullFiles)]
	perPage := queryInt(r, "per_page", 30)
	perPage = max(1, min(perPage, 100))
	page := max(1, queryInt(r, "page", 1))
	last := max(1, (len(files)+perPage-1)/perPage)
	from, to := min((page-1)*perPage, len(files)), min(page*perPage, len(files))
	out := make([]any, 0, to-from)
	for _, pf := range files[from:to] {
		out = append(out, f.diffEntry(repo, pf))
	}
	if page < last {
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next", <%s>; rel="last"`, f.pageURL(r, page+1, perPage), f.pageURL(r, last, perPage)))
	}
	writeJSON(w, http.StatusOK, out)
}

func queryInt(r *http.Request, name string, def int) int {
	n, err := strconv.Atoi(r.URL.Query().Get(name))
	if err != nil {
		return def
	}
	return n
}

// pageURL is the request's URL at another page.
func (f *Fake) pageURL(r *http.Request, page, perPage int) string {
	q := url.Values{"per_page": {strconv.Itoa(perPage)}, "page": {strconv.Itoa(page)}}
	return f.URL + r.URL.Path + "?" + q.Encode()
}

// diffEntry is a file as GitHub's example of a diff entry is, with the
// file's own fields.
func (f *Fake) diffEntry(repo *Repo, pf PullFile) map[string]any {
	ex, _ := f.desc.Example("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/files", 200).([]any)
	m := map[string]any{}
	if len(ex) > 0 {
		m, _ = ex[0].(map[string]any)
	}
	status := pf.Status
	if status == "" {
		status = "modified"
	}
	full := repo.Owner + "/" + repo.Name
	m["filename"], m["status"] = pf.Name, status
	m["blob_url"] = f.URL + "/" + full + "/blob/main/" + url.PathEscape(pf.Name)
	m["raw_url"] = f.URL + "/" + full + "/raw/main/" + url.PathEscape(pf.Name)
	m["contents_url"] = f.URL + "/repos/" + full + "/contents/" + url.PathEscape(pf.Name) + "?ref=main"
	if pf.Previous != "" {
		m["previous_filename"] = pf.Previous
	}
	return m
}
