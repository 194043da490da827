package gitlabtest

import (
	"fmt"
	"net/http"
	"strconv"
)

// MRFile is a file a merge request changes: its path, and the path it had
// before where it was renamed; Deleted and New as GitLab flags them.
type MRFile struct {
	Path, OldPath string
	New, Deleted  bool
}

// SetMRFiles sets the files a merge request of a project changes: GET
// /projects/:id/merge_requests/:merge_request_iid/diffs lists them, paged
// as GitLab pages (20 by default, 100 at most). A merge request whose
// files were not set answers 404, as GitLab does for one it does not have.
func (f *Fake) SetMRFiles(project string, iid int, files []MRFile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mrFiles == nil {
		f.mrFiles = map[string][]MRFile{}
	}
	f.mrFiles[fmt.Sprintf("%s!%d", project, iid)] = files
}

// SetFailing makes the diffs endpoint answer 500, as GitLab does when it
// cannot (or, false, answer again).
func (f *Fake) SetFailing(failing bool) {
	f.mu.Lock()
	f.failing = failing
	f.mu.Unlock()
}

// listDiffs answers a page of a merge request's diffs, with GitLab's
// pagination headers.
func listDiffs(f *Fake, w http.ResponseWriter, p *Project, params []string, in map[string]any) {
	f.mu.Lock()
	files, ok := f.mrFiles[p.Path+"!"+params[0]]
	failing := f.failing
	f.mu.Unlock()
	switch {
	case failing:
		writeJSON(w, http.StatusInternalServerError, map[string]any{"message": "500 Internal Server Error"})
		return
	case !ok:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Not found"})
		return
	}
	perPage := max(1, min(attrInt(in, "per_page", 20), 100))
	page := max(1, attrInt(in, "page", 1))
	pages := max(1, (len(files)+perPage-1)/perPage)
	from, to := min((page-1)*perPage, len(files)), min(page*perPage, len(files))
	out := make([]any, 0, to-from)
	for _, mf := range files[from:to] {
		old := mf.OldPath
		if old == "" {
			old = mf.Path
		}
		out = append(out, map[string]any{"old_path": old, "new_path": mf.Path, "a_mode": "100644", "b_mode": "100644",
			"diff": "@@ -1 +1 @@\n-before\n+after\n", "new_file": mf.New, "renamed_file": old != mf.Path, "deleted_file": mf.Deleted,
			"generated_file": false})
	}
	h := w.Header()
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(perPage))
	h.Set("X-Total", strconv.Itoa(len(files)))
	h.Set("X-Total-Pages", strconv.Itoa(pages))
	h.Set("X-Next-Page", "")
	if page < pages {
		h.Set("X-Next-Page", strconv.Itoa(page+1))
	}
	writeJSON(w, http.StatusOK, out)
}

// attrInt is an integer attribute (from the query), or def.
func attrInt(in map[string]any, name string, def int) int {
	switch v := in[name].(type) {
	case string:
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	case float64:
		return int(v)
	}
	return def
}
