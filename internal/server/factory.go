package server

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"factory"
	"factory/internal/automations"
	"factory/internal/cursor"
	"factory/internal/runs"
)

// The singular factory paths the current SDKs call (docs/spec,
// platform-api.md); /v1/factories... stay as they were.

// listFactoryObjects is GET /v1/factory?cursor=&limit=&search=: factories
// by name, a page at a time.
func (s *Server) listFactoryObjects(w http.ResponseWriter, r *http.Request) error {
	qs := r.URL.Query()
	limit := 50
	if v := qs.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return errorf(CodeInvalidRequest, "limit: must be a whole number from 1 to 100")
		}
		limit = n
	}
	key, err := s.cursorKey()
	if err != nil {
		return err
	}
	search := strings.ToLower(qs.Get("search"))
	scope := "factory?search=" + search
	after := ""
	if c := qs.Get("cursor"); c != "" {
		if after, err = cursor.Open(key, scope, c); err != nil {
			return errorf(CodeInvalidRequest, "cursor: not one this server gave for this query")
		}
	}
	fs, err := s.store.Factories()
	if err != nil {
		return err
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	out := []factory.FactoryObject{}
	page := factory.PageInfo{}
	for _, f := range fs {
		if f.Name <= after || search != "" && !matchesSearch(f, search) {
			continue
		}
		if len(out) == limit {
			page.HasNextPage = true
			page.NextCursor = cursor.Seal(key, scope, out[len(out)-1].Key)
			break
		}
		o, err := s.factoryObject(f)
		if err != nil {
			return err
		}
		out = append(out, o)
	}
	writeJSON(w, http.StatusOK, map[string]any{"factories": out, "page_info": page})
	return nil
}

// getFactoryObject is GET /v1/factory/{uid}.
func (s *Server) getFactoryObject(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	o, err := s.factoryObject(f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}

// matchesSearch: search is a case-insensitive part of the factory's
// name (factory.yaml's), its alias or its key.
func matchesSearch(f *factory.Factory, search string) bool {
	for _, v := range []string{f.Name, f.Settings.Name, f.Settings.Alias} {
		if strings.Contains(strings.ToLower(v), search) {
			return true
		}
	}
	return false
}

// factoryObject is a factory as the newest SDKs read it: it needs the
// server's team and the factory's runners.
func (s *Server) factoryObject(f *factory.Factory) (factory.FactoryObject, error) {
	team, err := s.teamUID()
	if err != nil {
		return factory.FactoryObject{}, err
	}
	runners, err := s.store.Resources(f.Name, factory.ResourceRunner)
	if err != nil {
		return factory.FactoryObject{}, err
	}
	uids := map[string]string{}
	for _, r := range runners {
		uids[r.Key] = r.UID
	}
	return f.Object(factory.ObjectContext{TeamUID: team, RunnerUIDs: uids}), nil
}

// teamUID is the one team of this server (tm_ + the server's ID, made
// once and kept in the store): every factory, agent and key belongs to it.
func (s *Server) teamUID() (string, error) {
	s.teamOnce.Do(func() {
		v, err := s.store.Meta("server_id")
		if err == nil && v == "" {
			v = factory.NewUID("")
			b := s.store.NewBatch()
			b.PutMeta("server_id", v)
			err = b.Commit()
		}
		s.teamUIDV, s.teamErr = factory.TeamPrefix+v, err
	})
	return s.teamUIDV, s.teamErr
}

// dispatch is POST /v1/factory/{uid}/runs {prompt, title?, ticket_ref?,
// ticket_url?}: a run for the factory's foreman, answered as the current
// SDKs read it.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	var q struct {
		Prompt    string `json:"prompt"`
		Title     string `json:"title"`
		TicketRef string `json:"ticket_ref"`
		TicketURL string `json:"ticket_url"`
	}
	if _, err := readJSON(r, maxRunBody, &q); err != nil {
		return err
	}
	if strings.TrimSpace(q.Prompt) == "" {
		return errorf(CodeInvalidRequest, "prompt: required")
	}
	if q.TicketRef != "" && !strings.Contains(q.TicketRef, ":") {
		return errorf(CodeInvalidRequest, `ticket_ref: must be "<source>:<id>"`)
	}
	meta := map[string]string{}
	for k, v := range map[string]string{"ticket_ref": q.TicketRef, "ticket_url": q.TicketURL} {
		if v != "" {
			meta[k] = v
		}
	}
	req := runs.CreateRequest{Prompt: q.Prompt, Title: q.Title, Source: factory.SourceAPI, FactoryUID: f.UID, Metadata: meta}
	if key := callerKey(r); key != nil {
		req.Creator, req.CreatorSecrets = apiKeyCreator(key), creatorSecrets(key)
	}
	foreman := foremanAgent
	ag, err := automations.ResolveAgent(s.store, s.cfg.Runs, f, "", nil)
	if err != nil {
		return err
	}
	if ag != nil { // a factory with agents: the run is its foreman's
		if req.Title == "" {
			req.Title = runs.TitleOf(q.Prompt)
		}
		ag.Apply(&req)
		foreman = ag.Name()
	}
	created, err := s.runs.Create(r.Context(), req, nil)
	if err != nil {
		return err
	}
	run := created.Run
	ticket := q.TicketRef
	if ticket == "" {
		ticket = "api:" + run.ID
	}
	writeJSON(w, http.StatusOK, map[string]any{"factory_uid": f.UID, "foreman_agent": foreman, "run_id": run.ID,
		"state": run.State, "ticket_ref": ticket, "run_url": fmt.Sprintf("%s/v1/agent/runs/%s", strings.TrimRight(s.cfg.PublicURL, "/"), run.ID)})
	return nil
}

// foremanAgent names the agent a dispatch goes to in a factory that
// defines no agents (the flat layout); otherwise it is its foreman's name.
const foremanAgent = "foreman"
