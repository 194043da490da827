package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"factory"

	"factory/internal/cursor"
	"factory/internal/runs"
	"factory/internal/runtime"
	"factory/internal/schema"
	"factory/internal/service"
	"factory/internal/store"
)

// The Agents API (docs/spec/agents-api.md): wire-compatible with the public Oz
// Agent API, so that its official SDKs work against this server.

const (
	maxRunBody        = 32 << 20
	maxAttachments    = 5
	maxAttachmentSize = 10 << 20
	maxMetadataKeys   = 20
)

func (s *Server) agentRoutes(mux *routes) {
	runs := func(h handler) http.Handler { return s.auth(s.needRuns(h), factory.ScopeRuns) }
	readRuns := func(h handler) http.Handler { return s.auth(s.needRuns(h), factory.ScopeRuns, factory.ScopeRead) }
	mux.Handle("POST /v1/agent/run", runs(s.createRun))
	mux.Handle("POST /v1/agent/runs", runs(s.createRun))
	mux.Handle("GET /v1/agent/runs", readRuns(s.listRuns))
	mux.Handle("GET /v1/agent/runs/{runId}", readRuns(s.getRun))
	mux.Handle("GET /v1/agent/runs/{runId}/timeline", readRuns(s.runTimeline))
	mux.Handle("GET /v1/agent/runs/{runId}/events", readRuns(s.runEvents))
	mux.Handle("GET /v1/events", readRuns(s.factoryEvents))
	mux.Handle("GET /v1/agent/runs/{runId}/attachments/{name}", readRuns(s.runAttachment))
	mux.Handle("POST /v1/agent/runs/{runId}/followups", runs(s.followUp))
	mux.Handle("POST /v1/agent/runs/{runId}/cancel", runs(s.cancelRun))
	mux.Handle("POST /v1/agent/runs/{runId}/interrupt", runs(s.interruptRun))
	mux.Handle("POST /v1/agent/runs/{runId}/approvals/{itemUid}", runs(s.answerApproval))
	mux.Handle("GET /v1/agent/runs/{runId}/conversation", readRuns(s.runConversation))
	mux.Handle("POST /v1/factories/{uid}/runs", runs(s.createFactoryRun))
	mux.Handle("GET /v1/agent/environments", readRuns(s.listEnvironments))
	mux.Handle("GET /v1/agent/artifacts/{uid}", readRuns(s.getArtifact))
	mux.Handle("GET /v1/agent/artifacts/{uid}/download", s.downloadArtifact())
	mux.Handle("GET /v1/agent/run-by-external-reference", readRuns(s.runByExternalReference))
}

func (s *Server) needRuns(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.cfg.Runs == nil {
			return errorf(CodeInvalidRequest, "this server does not execute runs")
		}
		return h(w, r)
	}
}

// readJSON decodes a body within a limit; a wrong type names the field.
func readJSON(r *http.Request, limit int64, v any) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, errorf(CodeInvalidRequest, "cannot read the request body")
	}
	if int64(len(b)) > limit {
		return nil, errorf(CodeInvalidRequest, fmt.Sprintf("the request body is over %d bytes", limit))
	}
	if err := json.Unmarshal(b, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, errorf(CodeInvalidRequest, fmt.Sprintf("%s: must be %s, not %s", te.Field, te.Type, te.Value))
		}
		return nil, errorf(CodeInvalidRequest, "the body is not valid JSON: "+err.Error())
	}
	return b, nil
}

// configKeys are AmbientAgentConfig's keys; others are ignored, as SDKs
// may send ones this server does not know.
var configKeys = map[string]bool{"name": true, "model_id": true, "base_prompt": true, "environment_id": true,
	"skill_spec": true, "mcp_servers": true, "idle_timeout_minutes": true, "worker_host": true}

// resolveConfig validates a config against the embedded schema and fills
// in its defaults, as the run will show it (agent_config).
func (s *Server) resolveConfig(cfg map[string]any) (json.RawMessage, string, error) {
	known := map[string]any{}
	for k, v := range cfg {
		if configKeys[k] {
			known[k] = v
		}
	}
	b, _ := json.Marshal(known)
	if _, ds := schema.ValidateDocument("config", b, schema.KindConfig); ds.HasErrors() {
		ds = ds.Errors()
		var msgs []string
		for _, d := range ds {
			msgs = append(msgs, "config"+d.Path+": "+d.Message)
		}
		return nil, "", errorf(CodeInvalidRequest, strings.Join(msgs, "; "))
	}
	if _, ok := known["idle_timeout_minutes"]; !ok {
		known["idle_timeout_minutes"] = 10
	}
	env, _ := known["environment_id"].(string)
	if env == "" {
		env = s.cfg.Runs.DefaultEnvironment()
		known["environment_id"] = env
	}
	if !s.cfg.Runs.HasEnvironment(env) {
		return nil, "", errorf(CodeInvalidRequest, fmt.Sprintf("config.environment_id: no environment %q on this server", env))
	}
	out, _ := json.Marshal(known)
	return out, env, nil
}

func (s *Server) createRun(w http.ResponseWriter, r *http.Request) error {
	return s.create(w, r, "")
}

func (s *Server) createFactoryRun(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	return s.create(w, r, f.UID)
}

// create is POST /v1/agent/run(s): a new run, QUEUED. With an
// Idempotency-Key, the same key and body answer the first answer again.
func (s *Server) create(w http.ResponseWriter, r *http.Request, factoryUID string) error {
	var q factory.RunRequest
	body, err := readJSON(r, maxRunBody, &q)
	if err != nil {
		return err
	}
	key := callerKey(r)
	var idem *service.Idempotency
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		idem = &service.Idempotency{Key: k, Body: body}
		if key != nil {
			idem.Caller = key.Prefix
		}
	}
	req, err := s.runRequestFor(r, &q, factoryUID)
	if err != nil {
		return err
	}
	if key != nil {
		req.Creator, req.CreatorSecrets = apiKeyCreator(key), creatorSecrets(key)
	}
	secret, err := s.runWebhook(&req, q.Webhook)
	if err != nil {
		return err
	}
	created, err := s.runs.Create(r.Context(), req, idem)
	if err != nil {
		return err
	}
	if created.Run != nil && secret != "" { // a run made now, not an Idempotency-Key's answer again
		writeJSON(w, http.StatusOK, struct {
			*service.Created
			WebhookSecret string `json:"webhook_secret"`
		}{created, secret})
		return nil
	}
	writeJSON(w, http.StatusOK, created)
	return nil
}

// runRequestFor checks a create request and builds the run it asks for:
// its source, factory, configuration and attachments.
func (s *Server) runRequestFor(r *http.Request, q *factory.RunRequest, factoryUID string) (runs.CreateRequest, error) {
	skillSpec, _ := q.Config["skill_spec"].(string)
	switch {
	case strings.TrimSpace(q.Prompt) == "" && q.Skill == "" && skillSpec == "":
		return runs.CreateRequest{}, errorf(CodeInvalidRequest, "prompt: required (unless skill or config.skill_spec is given)")
	case len(q.Attachments) > maxAttachments:
		return runs.CreateRequest{}, errorf(CodeInvalidRequest, fmt.Sprintf("attachments: at most %d", maxAttachments))
	case len(q.Metadata) > maxMetadataKeys:
		return runs.CreateRequest{}, errorf(CodeInvalidRequest, fmt.Sprintf("metadata: at most %d keys", maxMetadataKeys))
	case q.Mode != "" && q.Mode != "normal" && q.Mode != "plan" && q.Mode != "orchestrate":
		return runs.CreateRequest{}, errorf(CodeInvalidRequest, fmt.Sprintf("mode: %q must be one of normal, plan, orchestrate", q.Mode))
	}
	if err := checkMetadata(q.Metadata); err != nil {
		return runs.CreateRequest{}, err
	}
	req := runs.CreateRequest{Prompt: q.Prompt, Title: q.Title, Metadata: q.Metadata, Source: factory.SourceAPI, FactoryUID: factoryUID}
	if r.Header.Get("X-Factory-Source") == "CLI" {
		req.Source = factory.SourceCLI
	}
	if q.AgentIdentityUID != "" {
		f, err := s.factoryByForeman(q.AgentIdentityUID)
		if err != nil {
			return req, err
		}
		req.FactoryUID = f.UID
	}
	if q.Skill != "" && req.Prompt == "" {
		req.Prompt = "Use the skill " + q.Skill + "."
	}
	req.Skill, req.ConversationID = q.Skill, q.ConversationID
	if req.Skill == "" {
		req.Skill = skillSpec
	}
	var err error
	if req.Ancestors, err = s.ancestorsOf(q.ParentRunID); err != nil {
		return req, err
	}
	if req.Config, req.Environment, err = s.resolveConfig(q.Config); err != nil {
		return req, err
	}
	req.Attachments, err = decodeAttachments(q.Attachments)
	return req, err
}

// decodeAttachments checks and decodes the attachments of a request.
// ancestorsOf is the chain of a new run whose parent is parentID: the
// parent, then the parent's own chain.
func (s *Server) ancestorsOf(parentID string) ([]string, error) {
	if parentID == "" {
		return nil, nil
	}
	parent, err := s.store.Run(parentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(CodeInvalidRequest, fmt.Sprintf("parent_run_id: no run %s", parentID))
	}
	if err != nil {
		return nil, err
	}
	if len(parent.Ancestors) >= factory.MaxRunDepth {
		return nil, errorf(CodeInvalidRequest, fmt.Sprintf("parent_run_id: a tree of runs is at most %d deep", factory.MaxRunDepth))
	}
	return append([]string{parent.ID}, parent.Ancestors...), nil
}

func decodeAttachments(in []factory.RunAttachment) ([]runs.AttachmentData, error) {
	var out []runs.AttachmentData
	for i, a := range in {
		data, err := base64.StdEncoding.DecodeString(a.Data)
		if err != nil {
			return nil, errorf(CodeInvalidRequest, fmt.Sprintf("attachments[%d].data: must be base64", i))
		}
		name := a.FileName
		if err := runtime.CheckAttachmentName(name); err != nil {
			return nil, errorf(CodeInvalidRequest, fmt.Sprintf("attachments[%d].file_name: must be a plain file name: %v", i, err))
		}
		if slices.ContainsFunc(out, func(d runs.AttachmentData) bool { return d.Name == name }) {
			return nil, errorf(CodeInvalidRequest, fmt.Sprintf("attachments[%d].file_name: %q is given twice", i, name))
		}
		if len(data) > maxAttachmentSize {
			return nil, errorf(CodeInvalidRequest, fmt.Sprintf("attachments[%d]: over %d bytes", i, maxAttachmentSize))
		}
		out = append(out, runs.AttachmentData{Name: name, MimeType: a.MimeType, Data: data})
	}
	return out, nil
}

func (s *Server) factoryByForeman(uid string) (*factory.Factory, error) {
	fs, err := s.store.Factories()
	if err != nil {
		return nil, err
	}
	for _, f := range fs {
		if f.ForemanUID == uid {
			return f, nil
		}
	}
	return nil, errorf(CodeInvalidRequest, fmt.Sprintf("agent_identity_uid: no factory has the foreman UID %s", uid))
}

// parseTime accepts RFC 3339; a value without a zone is UTC.
func parseTime(v string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("not an RFC 3339 time")
}

// listRuns is GET /v1/agent/runs: the query's page of runs, and a cursor
// bound to the query for the next one.
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	items, info, err := s.runList(r.URL.Query())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": items, "page_info": info})
	return nil
}

// runList is a page of the run list for the API's query parameters, with
// the cursor of the next: the API's list and the dashboard's Runs page.
func (s *Server) runList(qs url.Values) ([]factory.RunItem, factory.PageInfo, error) {
	var info factory.PageInfo
	q, err := parseRunQuery(qs)
	if err != nil {
		return nil, info, err
	}
	if a := q.Equal["ancestor"]; a != "" {
		if _, err := s.store.Run(a); errors.Is(err, store.ErrNotFound) {
			return nil, info, errorf(CodeNotFound, fmt.Sprintf("ancestor_run_id: no run %s", a))
		}
	}
	key, err := s.cursorKey()
	if err != nil {
		return nil, info, err
	}
	scope := runQueryScope(qs)
	if q.SortBy == "updated_at" {
		// The walk is as of its first page: runs that change while a client
		// pages neither repeat nor go missing.
		q.AsOf = time.Now().UnixNano()
	}
	if c := qs.Get("cursor"); c != "" {
		if err := resumeRunQuery(&q, key, scope, c); err != nil {
			return nil, info, err
		}
	}
	page, err := s.store.ListRuns(q)
	if err != nil {
		return nil, info, err
	}
	items := []factory.RunItem{}
	for _, run := range page.Runs {
		items = append(items, run.Item())
	}
	info.HasNextPage = page.More
	if page.More {
		pos := page.Last
		if q.AsOf > 0 {
			pos += "|" + strconv.FormatInt(q.AsOf, 10)
		}
		info.NextCursor = cursor.Seal(key, scope, pos)
	}
	return items, info, nil
}

// resumeRunQuery continues a listing from a cursor this server gave for
// the same query: its position, and the time the listing is as of.
func resumeRunQuery(q *store.RunQuery, key []byte, scope, c string) error {
	pos, err := cursor.Open(key, scope, c)
	if err != nil {
		return errorf(CodeInvalidRequest, "cursor: not one this server gave for this query")
	}
	q.After = pos
	if p, asOf, ok := strings.Cut(pos, "|"); ok {
		n, _ := strconv.ParseInt(asOf, 10, 64)
		if time.Since(time.Unix(0, n)) > store.RunListWindow {
			return errorf(CodeInvalidRequest, fmt.Sprintf("cursor: this listing began over %s ago; start again from the first page", store.RunListWindow))
		}
		q.After, q.AsOf = p, n
	}
	return nil
}

// runFilterParams maps the list's filter parameters to index fields.
var runFilterParams = map[string]string{"name": "name", "config_name": "name", "model_id": "model_id", "environment_id": "environment_id",
	"creator": "creator", "automation_id": "automation_id", "schedule_id": "schedule_id", "skill": "skill", "skill_spec": "skill",
	"ancestor_run_id": "ancestor"}

// runSorts are the orders a list can take.
var runSorts = []string{"updated_at", "created_at", "title", "agent"}

// parseRunQuery reads the list parameters (docs/spec/platform-api.md):
// limit, order, states, field filters, metadata, search and time bounds.
func parseRunQuery(qs url.Values) (store.RunQuery, error) {
	q := store.RunQuery{Equal: map[string]string{}, Alternatives: map[string][]string{}, SortBy: "updated_at", Limit: 20}
	if v := qs.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return q, errorf(CodeInvalidRequest, "limit: must be a whole number from 1 to 500")
		}
		q.Limit = n
	}
	if v := qs.Get("sort_by"); v != "" {
		if !slices.Contains(runSorts, v) {
			return q, errorf(CodeInvalidRequest, "sort_by: must be one of "+strings.Join(runSorts, ", "))
		}
		q.SortBy = v
	}
	switch v := qs.Get("sort_order"); v {
	case "", "desc":
	case "asc":
		q.Asc = true
	default:
		return q, errorf(CodeInvalidRequest, "sort_order: must be desc or asc")
	}
	for _, v := range qs["state"] {
		st, ok := factory.ParseRunState(v)
		if !ok {
			return q, errorf(CodeInvalidRequest, fmt.Sprintf("state: %q is not a run state: one of %s", v, runStateNames()))
		}
		q.States = append(q.States, st)
	}
	for _, read := range []func(url.Values, *store.RunQuery) error{fieldFilters, sourceFilter, artifactFilter, metadataFilters,
		executionFilters, searchFilter, timeBounds} {
		if err := read(qs, &q); err != nil {
			return q, err
		}
	}
	return q, nil
}

// fieldFilters reads the filters on one field's value; factory_uid may
// repeat (any of them).
func fieldFilters(qs url.Values, q *store.RunQuery) error {
	for param, field := range runFilterParams {
		if v := qs.Get(param); v != "" {
			q.Equal[field] = v
		}
	}
	if vs := nonEmpty(qs["factory_uid"]); len(vs) > 0 {
		q.Equal["factory_uid"], q.Alternatives["factory_uid"] = vs[0], vs[1:]
	}
	switch v := qs.Get("factory_only"); v {
	case "", "false":
	case "true":
		q.Equal["in_factory"] = "true"
	default:
		return errorf(CodeInvalidRequest, "factory_only: must be true or false")
	}
	return nil
}

// sourceFilter reads source, which may repeat (any of them); each name
// matches the runs stored under its older spellings too.
func sourceFilter(qs url.Values, q *store.RunQuery) error {
	var stored []string
	for _, v := range nonEmpty(qs["source"]) {
		stored = append(stored, factory.StoredSources(v)...)
	}
	if len(stored) > 0 {
		q.Equal["source"], q.Alternatives["source"] = stored[0], stored[1:]
	}
	return nil
}

// artifactFilter reads artifact_type: runs that reported one of that type.
func artifactFilter(qs url.Values, q *store.RunQuery) error {
	v := qs.Get("artifact_type")
	if v == "" {
		return nil
	}
	if _, ok := factory.ParseArtifactType(v); !ok {
		return errorf(CodeInvalidRequest, fmt.Sprintf("artifact_type: %q is not one of FILE, PULL_REQUEST, PLAN, SCREENSHOT, EXTERNAL_REFERENCE", v))
	}
	q.Equal["artifact_type"] = v
	return nil
}

// maxMetadataFilters bounds the metadata[key]=value pairs of a list.
const maxMetadataFilters = 5

// metadataFilters reads metadata[key]=value pairs: all must match.
func metadataFilters(qs url.Values, q *store.RunQuery) error {
	n := 0
	for param, vs := range qs {
		key, ok := strings.CutPrefix(param, "metadata[")
		if !ok {
			continue
		}
		key, ok = strings.CutSuffix(key, "]")
		if !ok || !metadataKey.MatchString(key) {
			return errorf(CodeInvalidRequest, fmt.Sprintf("%s: a metadata filter is metadata[key]=value, key 1 to 64 of A-Z a-z 0-9 . _ -", param))
		}
		if n++; n > maxMetadataFilters {
			return errorf(CodeInvalidRequest, fmt.Sprintf("metadata: at most %d pairs", maxMetadataFilters))
		}
		q.Equal[store.MetadataField(key)] = vs[0]
	}
	return nil
}

// executionFilters reads executor and execution_location: every run here
// executes on this server (REMOTE, executor factory-server), so another
// value matches nothing.
func executionFilters(qs url.Values, q *store.RunQuery) error {
	switch v := qs.Get("execution_location"); v {
	case "", factory.ExecutionRemote:
	case "LOCAL":
		q.None = true
	default:
		return errorf(CodeInvalidRequest, "execution_location: must be LOCAL or REMOTE")
	}
	if v := qs.Get("executor"); v != "" && v != factory.Executor.UID {
		q.None = true
	}
	return nil
}

// searchFilter reads q: a run ID finds that run; other text matches runs
// whose title, skill or prompt holds it, ignoring case (store.RunQuery).
func searchFilter(qs url.Values, q *store.RunQuery) error {
	text := strings.TrimSpace(qs.Get("q"))
	if text == "" {
		return nil
	}
	if len(text) > 256 {
		return errorf(CodeInvalidRequest, "q: at most 256 bytes")
	}
	if factory.ValidUID(factory.PrefixRun, text) {
		q.ID = text
		return nil
	}
	q.Search = text
	return nil
}

func nonEmpty(vs []string) []string {
	var out []string
	for _, v := range vs {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// timeBounds reads created_after, created_before and updated_after. Bounds
// on the sort key bound the walk; the others are checked run by run.
func timeBounds(qs url.Values, q *store.RunQuery) error {
	var createdAfter, createdBefore, updatedAfter time.Time
	for param, dst := range map[string]*time.Time{"created_after": &createdAfter, "created_before": &createdBefore, "updated_after": &updatedAfter} {
		if v := qs.Get(param); v != "" {
			t, err := parseTime(v)
			if err != nil {
				return errorf(CodeInvalidRequest, param+": must be an RFC 3339 time")
			}
			*dst = t
		}
	}
	if q.SortBy == "created_at" {
		if !createdAfter.IsZero() {
			q.MinNanos = createdAfter.UnixNano() + 1
		}
		if !createdBefore.IsZero() {
			q.MaxNanos = createdBefore.UnixNano() - 1
		}
	} else if q.SortBy == "updated_at" && !updatedAfter.IsZero() {
		q.MinNanos = updatedAfter.UnixNano() + 1
	}
	if createdAfter.IsZero() && createdBefore.IsZero() && updatedAfter.IsZero() {
		return nil
	}
	q.And(func(run *factory.Run) bool {
		return (createdAfter.IsZero() || run.CreatedAt.After(createdAfter)) &&
			(createdBefore.IsZero() || run.CreatedAt.Before(createdBefore)) &&
			(updatedAfter.IsZero() || run.UpdatedAt.After(updatedAfter))
	})
	return nil
}

// runQueryScope binds a cursor to its query: the same filters and order.
func runQueryScope(qs url.Values) string {
	var parts []string
	for k, vs := range qs {
		if k == "cursor" || k == "limit" {
			continue
		}
		sorted := append([]string(nil), vs...)
		sort.Strings(sorted)
		parts = append(parts, k+"="+strings.Join(sorted, ","))
	}
	sort.Strings(parts)
	return "runs?" + strings.Join(parts, "&")
}

func (s *Server) runOf(r *http.Request) (*factory.Run, error) {
	run, err := s.store.Run(r.PathValue("runId"))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(CodeNotFound, fmt.Sprintf("no run %s", r.PathValue("runId")))
	}
	return run, err
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, run.Item())
	return nil
}

func (s *Server) runAttachment(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runOf(r)
	if err != nil {
		return err
	}
	for _, a := range run.Attachments {
		if a.Name == r.PathValue("name") {
			b, err := s.store.RunAttachment(run.ID, a.Name)
			if err != nil {
				return err
			}
			sendUntrusted(w, a.MimeType, a.Name, b)
			return nil
		}
	}
	return errorf(CodeNotFound, fmt.Sprintf("run %s has no attachment %q", run.ID, r.PathValue("name")))
}

func (s *Server) followUp(w http.ResponseWriter, r *http.Request) error {
	ans, err := s.sendFollowUp(r, r.PathValue("runId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ans)
	return nil
}

// sendFollowUp reads a follow-up request and sends it to the run.
func (s *Server) sendFollowUp(r *http.Request, runID string) (runs.FollowUpAnswer, error) {
	var none runs.FollowUpAnswer
	var q struct {
		Message     string               `json:"message"`
		Mode        string               `json:"mode"`
		Attachments []followUpAttachment `json:"attachments"`
	}
	if _, err := readJSON(r, 1<<20, &q); err != nil {
		return none, err
	}
	switch {
	case strings.TrimSpace(q.Message) == "" && len(q.Attachments) == 0:
		return none, errorf(CodeInvalidRequest, "message: required (unless attachments are given)")
	case q.Mode != "" && q.Mode != "normal" && q.Mode != "plan" && q.Mode != "orchestrate":
		return none, errorf(CodeInvalidRequest, fmt.Sprintf("mode: %q must be one of normal, plan, orchestrate", q.Mode))
	case len(q.Attachments) > maxFollowUpAttachments:
		return none, errorf(CodeInvalidRequest, fmt.Sprintf("attachments: at most %d", maxFollowUpAttachments))
	}
	files, err := s.followUpFiles(q.Attachments)
	if err != nil {
		return none, err
	}
	message := q.Message
	if strings.TrimSpace(message) == "" {
		var names []string
		for _, f := range files {
			names = append(names, f.Name)
		}
		message = "Attached: " + strings.Join(names, ", ")
	}
	return s.runs.FollowUp(r.Context(), runID, message, files)
}

// maxFollowUpAttachments is the platform API's bound on a follow-up's
// attachments.
const maxFollowUpAttachments = 25

// followUpAttachment names a file for a follow-up: an artifact's UID (a
// run's output, say a plan to carry on from), and the name the agent sees
// it under (the artifact's file name by default).
type followUpAttachment struct {
	AttachmentID string `json:"attachment_id"`
	FileName     string `json:"file_name"`
}

// followUpFiles reads the artifacts a follow-up attaches.
func (s *Server) followUpFiles(atts []followUpAttachment) ([]runs.AttachmentData, error) {
	var files []runs.AttachmentData
	for _, a := range atts {
		_, art, err := s.store.Artifact(a.AttachmentID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(CodeInvalidRequest, fmt.Sprintf("attachments: no artifact %q (attachment_id names an artifact's artifact_uid)", a.AttachmentID))
		}
		if err != nil {
			return nil, err
		}
		data, err := s.store.ArtifactBytes(a.AttachmentID)
		if err != nil {
			return nil, err
		}
		name := a.FileName
		if name == "" {
			name = art.Data.Filename
		}
		if name == "" {
			name = a.AttachmentID
		}
		if err := runtime.CheckAttachmentName(name); err != nil {
			return nil, errorf(CodeInvalidRequest, "attachments: "+err.Error())
		}
		files = append(files, runs.AttachmentData{Name: name, MimeType: art.Data.MimeType, Data: data})
	}
	return files, nil
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	run, err := s.runs.Cancel(r.Context(), r.PathValue("runId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, run.ID) // a bare JSON string (docs/spec/agents-api.md)
	return nil
}

// interruptRun is POST /v1/agent/runs/{runId}/interrupt: the current turn
// stops, the run waits (BLOCKED) for a follow-up. 202: the turn is being
// stopped.
func (s *Server) interruptRun(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("runId")
	if err := s.runs.Interrupt(r.Context(), id); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": id})
	return nil
}

// runStateNames lists the run states for an error message.
func runStateNames() string {
	names := make([]string, len(factory.RunStates))
	for i, st := range factory.RunStates {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// creatorSecrets are the secrets of an API key's person's own code host
// tokens, by host.
func creatorSecrets(key *factory.APIKey) map[string]string { return key.CreatorSecrets() }

// answerApproval is POST /v1/agent/runs/{id}/approvals/{item uid}
// {option_id}: a person answers a tool call the run's agent waits on
// (permissions ask) with one of the options the agent offered.
func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		OptionID string `json:"option_id"`
	}
	if _, err := readJSON(r, 4<<10, &q); err != nil {
		return err
	}
	it, err := s.runs.AnswerApproval(r.Context(), r.PathValue("runId"), r.PathValue("itemUid"), q.OptionID, apiKeyCreator(callerKey(r)))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, it.Wire(callerKey(r).Prefix, factory.StageTriage, ""))
	return nil
}

// apiKeyCreator is who a key's runs are created by.
func apiKeyCreator(key *factory.APIKey) *factory.Creator { return key.Creator() }

// listEnvironments is GET /v1/agent/environments: where runs can execute.
// The config shows the executor's kind only: commands and variables may
// hold credentials.
func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request) error {
	out := []map[string]any{}
	for _, e := range s.cfg.Runs.EnvironmentList() {
		out = append(out, map[string]any{"uid": factory.DerivedID("env_", e.Name), "name": e.Name,
			"description":  e.Executor + " environment",
			"config":       map[string]any{"name": e.Name, "description": e.Executor + " environment", "executor": e.Executor},
			"last_updated": s.started, "setup_failed": false})
	}
	writeJSON(w, http.StatusOK, map[string]any{"environments": out})
	return nil
}

// metadataKey is what a metadata key may be (the platform API's rule).
var metadataKey = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// checkMetadata enforces the platform API's metadata limits: keys of 1 to
// 64 of A-Z a-z 0-9 . _ -, values of at most 256 bytes.
func checkMetadata(m map[string]string) error {
	for k, v := range m {
		if !metadataKey.MatchString(k) {
			return errorf(CodeInvalidRequest, fmt.Sprintf("metadata: key %q must be 1 to 64 of A-Z a-z 0-9 . _ -", k))
		}
		if len(v) > 256 {
			return errorf(CodeInvalidRequest, fmt.Sprintf("metadata: the value of %q is over 256 bytes", k))
		}
	}
	return nil
}
