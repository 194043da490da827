package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"factory"
	"factory/internal/foreman"
)

// Tasks and the inbox (docs/spec/foreman.md), as the newest SDKs call them:
// the foreman service does the work; these handlers read requests and
// write answers.
func (s *Server) taskRoutes(mux *routes) {
	read := func(h handler) http.Handler { return s.auth(s.needForeman(h), factory.ScopeRuns, factory.ScopeRead) }
	write := func(h handler) http.Handler { return s.auth(s.needForeman(h), factory.ScopeRuns) }
	mux.Handle("GET /v1/factory/{uid}/tasks", read(s.listTasks))
	mux.Handle("POST /v1/factory/{uid}/tasks", write(s.createTask))
	mux.Handle("PATCH /v1/factory/{uid}/tasks/{taskUid}", write(s.updateTask))
	mux.Handle("DELETE /v1/factory/{uid}/tasks/{taskUid}", write(s.deleteTask))
	mux.Handle("POST /v1/factory/{uid}/tasks/{taskUid}/cancel", write(s.cancelTask))
	mux.Handle("GET /v1/factory/{uid}/task-by-conversation", read(s.taskByConversation))
	mux.Handle("GET /v1/factory/{uid}/task-by-run", read(s.taskByRun))
	mux.Handle("GET /v1/factory-inbox", read(s.listInbox))
	mux.Handle("GET /v1/factory-inbox/items/{id}", read(s.getInboxItem))
	mux.Handle("POST /v1/factory-inbox/items/{id}/answer", write(s.answerInboxItem))
	mux.Handle("POST /v1/factory-inbox/notifications/read", read(s.markInbox(true)))
	mux.Handle("POST /v1/factory-inbox/notifications/unread", read(s.markInbox(false)))
}

// needForeman answers for a server that keeps no tasks (it runs none).
func (s *Server) needForeman(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.foreman == nil {
			return errorf(CodeInvalidRequest, "this server does not execute runs: it keeps no tasks")
		}
		return h(w, r)
	}
}

// maxTaskBody bounds a task's create or update.
const maxTaskBody = 64 << 10

func (s *Server) createTask(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	var q struct {
		ConversationID string  `json:"conversation_id"`
		Title          *string `json:"title"`
		Description    *string `json:"description"`
		Stage          *string `json:"stage"`
	}
	if _, err := readJSON(r, maxTaskBody, &q); err != nil {
		return err
	}
	in := foreman.TaskFields{Title: q.Title, Description: q.Description}
	if in.Stage, err = stageField(q.Stage); err != nil {
		return err
	}
	var author *factory.Creator
	if k := callerKey(r); k != nil {
		author = k.Creator()
	}
	t, err := s.foreman.CreateTask(f, q.ConversationID, in, author)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.foreman.View(t, true, true, true))
	return nil
}

// stageField reads an optional stage.
func stageField(v *string) (*factory.TaskStage, error) {
	if v == nil {
		return nil, nil
	}
	st, ok := factory.ParseTaskStage(*v)
	if !ok || string(st) != *v {
		return nil, errorf(CodeInvalidRequest, "stage: one of TRIAGE, SPEC, IMPLEMENT, REVIEW, COMPLETE, CANCELLED")
	}
	return &st, nil
}

// updateTask is PATCH: a field left out stays; description null or ""
// clears it.
func (s *Server) updateTask(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	var q map[string]json.RawMessage
	if _, err := readJSON(r, maxTaskBody, &q); err != nil {
		return err
	}
	var in foreman.TaskFields
	str := func(key string) (*string, error) {
		raw, ok := q[key]
		if !ok {
			return nil, nil
		}
		v := ""
		if string(raw) != "null" {
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, errorf(CodeInvalidRequest, key+": a string")
			}
		}
		return &v, nil
	}
	if in.Title, err = str("title"); err != nil {
		return err
	}
	if in.Description, err = str("description"); err != nil {
		return err
	}
	stage, err := str("stage")
	if err != nil {
		return err
	}
	if in.Stage, err = stageField(stage); err != nil {
		return err
	}
	t, err := s.foreman.UpdateTask(f, r.PathValue("taskUid"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.foreman.View(t, true, true, true))
	return nil
}

func (s *Server) deleteTask(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	if err := s.foreman.DeleteTask(f, r.PathValue("taskUid")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) cancelTask(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	t, err := s.foreman.CancelTask(f, r.PathValue("taskUid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.foreman.View(t, true, true, true))
	return nil
}

// getTask is GET /v1/factory/{uid}/tasks/{task} (through factoryThirdLevel:
// the path values are a, b, c).
func (s *Server) getTask(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("a"))
	if err != nil {
		return err
	}
	t, err := s.foreman.Task(f, r.PathValue("c"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.foreman.View(t, true, true, true))
	return nil
}

func (s *Server) taskByConversation(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	id := r.URL.Query().Get("conversation_id")
	if id == "" {
		return errorf(CodeInvalidRequest, "conversation_id: required")
	}
	t, err := s.foreman.TaskByConversation(f, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.foreman.View(t, true, true, true))
	return nil
}

func (s *Server) taskByRun(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	id := r.URL.Query().Get("run_id")
	if id == "" {
		return errorf(CodeInvalidRequest, "run_id: required")
	}
	t, err := s.foreman.TaskByRun(f, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.foreman.View(t, true, true, true))
	return nil
}

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	q, err := taskQuery(r)
	if err != nil {
		return err
	}
	page, err := s.foreman.ListTasks(f, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// taskQuery reads a task list's query (the SDKs' TaskListParams).
func taskQuery(r *http.Request) (foreman.TaskQuery, error) {
	v := r.URL.Query()
	q := foreman.TaskQuery{Search: v.Get("q"), CreatedBy: v["created_by"], Cursor: v.Get("cursor"), SortBy: v.Get("sort_by")}
	for _, st := range v["stage"] {
		stage, err := stageField(&st)
		if err != nil {
			return q, err
		}
		q.Stages = append(q.Stages, *stage)
	}
	switch q.SortBy {
	case "", "created_at", "updated_at":
	default:
		return q, errorf(CodeInvalidRequest, "sort_by: created_at or updated_at")
	}
	switch v.Get("sort_order") {
	case "", "desc":
	case "asc":
		q.Asc = true
	default:
		return q, errorf(CodeInvalidRequest, "sort_order: asc or desc")
	}
	var err error
	for key, dst := range map[string]*time.Time{"created_after": &q.CreatedAfter, "created_before": &q.CreatedBefore, "updated_after": &q.UpdatedAfter} {
		if raw := v.Get(key); raw != "" {
			if *dst, err = time.Parse(time.RFC3339Nano, raw); err != nil {
				return q, errorf(CodeInvalidRequest, key+": an RFC 3339 time")
			}
		}
	}
	if raw := v.Get("limit"); raw != "" {
		if q.Limit, err = strconv.Atoi(raw); err != nil || q.Limit < 1 || q.Limit > 100 {
			return q, errorf(CodeInvalidRequest, "limit: 1 to 100")
		}
	}
	q.Full, q.CurrentRun = boolParam(v.Get("full_list")), boolParam(v.Get("include_current_run"))
	return q, nil
}

func boolParam(v string) bool { return v == "true" || v == "1" }

// reader is who reads the inbox: read marks are theirs.
func reader(r *http.Request) string {
	if k := callerKey(r); k != nil {
		return k.Prefix
	}
	return ""
}

func (s *Server) listInbox(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	q := foreman.InboxQuery{Reader: reader(r), Resolved: boolParam(v.Get("include_resolved")), FactoryUID: v.Get("factory_uid"),
		TaskUID: v.Get("factory_task_uid"), Kinds: v["kind"]}
	items, err := s.foreman.Inbox(q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
	return nil
}

func (s *Server) getInboxItem(w http.ResponseWriter, r *http.Request) error {
	it, err := s.foreman.Item(r.PathValue("id"), reader(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, it)
	return nil
}

func (s *Server) answerInboxItem(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		Answer  string `json:"answer"`
		Comment string `json:"comment"`
	}
	if _, err := readJSON(r, maxTaskBody, &q); err != nil {
		return err
	}
	var by *factory.Creator
	if k := callerKey(r); k != nil {
		by = k.Creator()
	}
	it, err := s.foreman.Answer(r.PathValue("id"), q.Answer, q.Comment, by)
	if err != nil {
		return err
	}
	wire, err := s.foreman.Item(it.UID, reader(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire)
	return nil
}

// markInbox is POST /v1/factory-inbox/notifications/read and /unread
// {notification_uids}: {outcomes: [{notification_uid, ok}]}.
func (s *Server) markInbox(read bool) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		var q struct {
			UIDs []string `json:"notification_uids"`
		}
		if _, err := readJSON(r, maxTaskBody, &q); err != nil {
			return err
		}
		if len(q.UIDs) == 0 || len(q.UIDs) > 500 {
			return errorf(CodeInvalidRequest, "notification_uids: 1 to 500 of them")
		}
		for _, u := range q.UIDs {
			if strings.TrimSpace(u) == "" {
				return errorf(CodeInvalidRequest, "notification_uids: an empty UID")
			}
		}
		out, err := s.foreman.MarkRead(reader(r), q.UIDs, read)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, map[string]any{"outcomes": out})
		return nil
	}
}
