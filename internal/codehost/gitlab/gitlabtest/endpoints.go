package gitlabtest

import (
	"fmt"
	"net/http"
	"strconv"
)

// endpoints are the API v4 endpoints the fake serves, with the attributes
// GitLab's documentation gives each.
var endpoints = []endpoint{
	ep("GET", "/projects/:id", map[string]string{"license": "boolean", "statistics": "boolean", "with_custom_attributes": "boolean"}, nil, getProject),
	ep("POST", "/projects/:id/issues/:issue_iid/notes", noteAttrs, []string{"body"}, createNote("Issue")),
	ep("PUT", "/projects/:id/issues/:issue_iid/notes/:note_id", map[string]string{"body": "string", "confidential": "boolean"}, []string{"body"}, updateNote("Issue")),
	ep("POST", "/projects/:id/merge_requests/:merge_request_iid/notes", noteAttrs, []string{"body"}, createNote("MergeRequest")),
	ep("PUT", "/projects/:id/merge_requests/:merge_request_iid/notes/:note_id", map[string]string{"body": "string", "confidential": "boolean"}, []string{"body"}, updateNote("MergeRequest")),
	ep("POST", "/projects/:id/issues/:issue_iid/award_emoji", emojiAttrs, []string{"name"}, award("Issue")),
	ep("POST", "/projects/:id/issues/:issue_iid/notes/:note_id/award_emoji", emojiAttrs, []string{"name"}, award("Issue")),
	ep("POST", "/projects/:id/merge_requests/:merge_request_iid/award_emoji", emojiAttrs, []string{"name"}, award("MergeRequest")),
	ep("POST", "/projects/:id/merge_requests/:merge_request_iid/notes/:note_id/award_emoji", emojiAttrs, []string{"name"}, award("MergeRequest")),
	ep("GET", "/projects/:id/merge_requests", map[string]string{"source_branch": "string", "target_branch": "string", "state": "string",
		"page": "integer", "per_page": "integer", "order_by": "string", "sort": "string"}, nil, listMRs),
	ep("GET", "/projects/:id/merge_requests/:merge_request_iid/diffs", map[string]string{"page": "integer", "per_page": "integer", "unidiff": "boolean"},
		nil, listDiffs),
	ep("POST", "/projects/:id/merge_requests", map[string]string{"source_branch": "string", "target_branch": "string", "title": "string",
		"description": "string", "draft": "boolean", "remove_source_branch": "boolean"}, []string{"source_branch", "target_branch", "title"}, createMR),
	ep("POST", "/projects/:id/statuses/:sha", map[string]string{"state": "string", "ref": "string", "name": "string", "context": "string",
		"target_url": "string", "description": "string", "coverage": "number", "pipeline_id": "integer"}, []string{"state"}, setStatus),
}

var (
	noteAttrs  = map[string]string{"body": "string", "confidential": "boolean", "internal": "boolean", "created_at": "string", "merge_request_diff_head_sha": "string"}
	emojiAttrs = map[string]string{"name": "string"}
)

func getProject(f *Fake, w http.ResponseWriter, p *Project, _ []string, _ map[string]any) {
	writeJSON(w, http.StatusOK, map[string]any{"id": p.ID, "name": nameOf(p.Path), "path": nameOf(p.Path), "path_with_namespace": p.Path,
		"default_branch": p.DefaultBranch, "http_url_to_repo": f.URL + "/git/" + p.Path + ".git", "ssh_url_to_repo": "git@example.invalid:" + p.Path + ".git",
		"web_url": f.URL + "/" + p.Path, "visibility": "private", "created_at": now()})
}

func nameOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}

func noteJSON(n *Note) map[string]any {
	return map[string]any{"id": n.ID, "type": nil, "body": n.Body, "attachment": nil, "author": map[string]any{"id": 1, "username": "factory-bot", "name": "Factory"},
		"created_at": now(), "updated_at": now(), "system": false, "noteable_id": n.IID, "noteable_type": n.Noteable, "noteable_iid": n.IID,
		"resolvable": false, "confidential": false, "internal": false}
}

func createNote(noteable string) func(*Fake, http.ResponseWriter, *Project, []string, map[string]any) {
	return func(f *Fake, w http.ResponseWriter, p *Project, params []string, in map[string]any) {
		iid, _ := strconv.Atoi(params[0])
		body, _ := in["body"].(string)
		f.mu.Lock()
		f.nextID++
		n := &Note{ID: f.nextID, Project: p.Path, Noteable: noteable, IID: iid, Body: body}
		f.Notes = append(f.Notes, n)
		f.mu.Unlock()
		writeJSON(w, http.StatusCreated, noteJSON(n))
	}
}

func updateNote(noteable string) func(*Fake, http.ResponseWriter, *Project, []string, map[string]any) {
	return func(f *Fake, w http.ResponseWriter, p *Project, params []string, in map[string]any) {
		iid, _ := strconv.Atoi(params[0])
		id, _ := strconv.ParseInt(params[1], 10, 64)
		body, _ := in["body"].(string)
		f.mu.Lock()
		var n *Note
		for _, x := range f.Notes {
			if x.ID == id && x.Project == p.Path && x.Noteable == noteable && x.IID == iid {
				n = x
			}
		}
		if n != nil {
			n.Body, n.Edits = body, n.Edits+1
		}
		f.mu.Unlock()
		if n == nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "404 Note Not Found"})
			return
		}
		writeJSON(w, http.StatusOK, noteJSON(n))
	}
}

func award(noteable string) func(*Fake, http.ResponseWriter, *Project, []string, map[string]any) {
	return func(f *Fake, w http.ResponseWriter, p *Project, params []string, in map[string]any) {
		iid, _ := strconv.Atoi(params[0])
		var note int64
		if len(params) > 1 {
			note, _ = strconv.ParseInt(params[1], 10, 64)
		}
		name, _ := in["name"].(string)
		f.mu.Lock()
		f.Awards = append(f.Awards, Award{Project: p.Path, Noteable: noteable, IID: iid, Note: note, Name: name})
		f.nextID++
		id := f.nextID
		f.mu.Unlock()
		awardable, typ := int64(iid), noteable
		if note != 0 {
			awardable, typ = note, "Note"
		}
		writeJSON(w, http.StatusCreated, map[string]any{"id": id, "name": name, "user": map[string]any{"id": 1, "username": "factory-bot"},
			"created_at": now(), "updated_at": now(), "awardable_id": awardable, "awardable_type": typ})
	}
}

func mrJSON(mr *MergeRequest) map[string]any {
	return map[string]any{"id": mr.IID + 90000, "iid": mr.IID, "project_id": 1, "title": mr.Title, "state": mr.State, "draft": mr.Draft,
		"work_in_progress": mr.Draft, "source_branch": mr.Source, "target_branch": mr.Target, "web_url": mr.WebURL,
		"created_at": now(), "updated_at": now(), "author": map[string]any{"id": 1, "username": "factory-bot"}}
}

func listMRs(f *Fake, w http.ResponseWriter, p *Project, _ []string, in map[string]any) {
	src, _ := in["source_branch"].(string)
	state, _ := in["state"].(string)
	out := []any{}
	f.mu.Lock()
	for _, mr := range f.MRs {
		if mr.Project == p.Path && (src == "" || mr.Source == src) && (state == "" || state == "all" || mr.State == state) {
			out = append(out, mrJSON(mr))
		}
	}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func createMR(f *Fake, w http.ResponseWriter, p *Project, _ []string, in map[string]any) {
	src, _ := in["source_branch"].(string)
	dst, _ := in["target_branch"].(string)
	title, _ := in["title"].(string)
	draft, _ := in["draft"].(bool)
	f.mu.Lock()
	mr := &MergeRequest{IID: len(f.MRs) + 1, Project: p.Path, Title: title, Source: src, Target: dst, State: "opened", Draft: draft}
	mr.WebURL = fmt.Sprintf("%s/%s/-/merge_requests/%d", f.URL, p.Path, mr.IID)
	f.MRs = append(f.MRs, mr)
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, mrJSON(mr))
}

// statusStates are the states GitLab's commit statuses take.
var statusStates = map[string]bool{"pending": true, "running": true, "success": true, "failed": true, "canceled": true, "skipped": true}

func setStatus(f *Fake, w http.ResponseWriter, p *Project, params []string, in map[string]any) {
	state, _ := in["state"].(string)
	if !statusStates[state] {
		f.problem("POST /projects/:id/statuses/:sha: state %q is not one GitLab takes", state)
	}
	name, _ := in["name"].(string)
	desc, _ := in["description"].(string)
	f.mu.Lock()
	f.Statuses = append(f.Statuses, Status{Project: p.Path, SHA: params[0], State: state, Name: name, Description: desc})
	f.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "sha": params[0], "ref": nil, "status": state, "name": name,
		"description": desc, "created_at": now(), "started_at": nil, "finished_at": now(), "allow_failure": false})
}

// SetMR changes a merge request as GitLab would on a merge or close.
func (f *Fake) SetMR(iid int, state string) *MergeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, mr := range f.MRs {
		if mr.IID == iid {
			mr.State = state
			return mr
		}
	}
	return nil
}
