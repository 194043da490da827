package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"factory"
	"factory/internal/measure"
)

// Scorers, benchmark suites and runs, self-improvement and factory tasks
// as the newest SDKs call them (docs/agents-api.md, "Scorers, benchmarks
// and tasks"; docs/measure-and-improve.md). Scorers and suites are the
// factories' files: creating one through the API is refused. Scores,
// benchmark runs and self-improvement runs are the measure service's.
// Tasks are the foreman's (tasks.go).

func (s *Server) measureRoutes(mux *routes) {
	read := func(h handler) http.Handler { return s.auth(h, factory.ScopeRuns, factory.ScopeRead) }
	write := func(h handler) http.Handler { return s.auth(s.needRuns(h), factory.ScopeRuns) }
	mux.Handle("GET /v1/factory/scorers", read(s.listScorers))
	mux.Handle("POST /v1/factory/scorers", write(refuse("creating a scorer: scorers are defined by their factory's files (scorers/<name>/scorer.md)")))
	mux.Handle("GET /v1/factory/scorers/{scorerId}/results", read(s.scorerResults))
	mux.Handle("GET /v1/factory/scorers/{scorerId}/results/reasons", read(s.scorerReasons))
	mux.Handle("POST /v1/factory/scorers/{scorerId}/score", write(s.scoreRun))
	mux.Handle("GET /v1/factory/{uid}/benchmarks/suites", read(s.listSuites))
	mux.Handle("POST /v1/factory/{uid}/benchmarks/suites", write(refuse("creating a suite: suites are defined by their factory's files (benchmarks/<suite>/suite.yaml)")))
	mux.Handle("GET /v1/factory/{uid}/benchmarks/suites/{suiteUid}", read(s.getSuite))
	mux.Handle("POST /v1/factory/{uid}/benchmarks/suites/{suiteUid}/runs", write(s.launchSuite))
	mux.Handle("GET /v1/factory/{uid}/benchmarks/runs", read(s.listBenchmarkRuns))
	mux.Handle("GET /v1/factory/{uid}/benchmarks/runs/{runUid}", read(s.getBenchmarkRun))
	mux.Handle("GET /v1/factory/{uid}/benchmarks/runs/{runUid}/results", read(s.benchmarkResults))
	mux.Handle("POST /v1/factory/{uid}/benchmarks/runs/{runUid}/cancel", write(s.cancelBenchmarkRun))
	mux.Handle("GET /v1/factory/{uid}/self-improvement", read(s.listProposals))
	mux.Handle("POST /v1/factory/{uid}/self-improvement/run", write(s.improveNow))
	// GET /v1/factory/{uid}/tasks/{task} and GET /v1/factory/runs/{run}/scores
	// overlap (/v1/factory/runs/tasks/scores): one pattern serves both.
	mux.Handle("GET /v1/factory/{a}/{b}/{c}", read(s.factoryThirdLevel))
}

// factoryThirdLevel is GET /v1/factory/runs/{run}/scores and GET
// /v1/factory/{uid}/tasks/{task}.
func (s *Server) factoryThirdLevel(w http.ResponseWriter, r *http.Request) error {
	a, b, c := r.PathValue("a"), r.PathValue("b"), r.PathValue("c")
	switch {
	case a == "runs" && c == "scores":
		return s.needRuns(func(w http.ResponseWriter, r *http.Request) error { return s.runScores(w, b) })(w, r)
	case b == "tasks":
		return s.needForeman(s.getTask)(w, r)
	}
	return errorf(CodeNotFound, "no such path: "+r.URL.Path)
}

// refuse answers 422 operation_not_supported with why.
func refuse(why string) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		return errorf(CodeOperationNotSupported, why)
	}
}

// scorerObject is an applied scorer as the SDKs' Scorer, with what its
// scores say (result_count, last_scored_at, pass_rate_summary).
func (s *Server) scorerObject(f *factory.Factory, res *factory.Resource, agentUIDs map[string]string, q scorerStatsQuery) (map[string]any, error) {
	sc, err := measure.ScorerOf(f, res)
	if err != nil {
		return nil, err
	}
	agents := []map[string]any{}
	for _, a := range sc.Agents {
		agents = append(agents, map[string]any{"name": a, "uid": agentUIDs[a], "include_descendants": false})
	}
	scope := "selected_agents"
	if len(agents) == 0 {
		scope = "all_agents"
	}
	labels := []map[string]any{}
	for _, l := range sc.Labels {
		o := map[string]any{"value": l.Value, "score": l.Score}
		if l.Description != "" {
			o["description"] = l.Description
		}
		labels = append(labels, o)
	}
	count, err := s.store.ScorerResultCount(sc.UID)
	if err != nil {
		return nil, err
	}
	summary, last, err := s.passRateSummary(sc, q.limit, q.start, q.end)
	if err != nil {
		return nil, err
	}
	if q.start != nil { // last_scored_at is never scoped by the window
		_, last, _ = s.passRateSummary(sc, 1, nil, nil)
	}
	return map[string]any{"id": sc.ID, "uid": sc.UID, "name": sc.Name, "description": sc.Description, "factory_uid": f.UID,
		"model_id": sc.Model, "agents": agents, "scope_mode": scope, "allowed_classifications": labels, "threshold": sc.Threshold,
		"sampling_rate": sc.Rate, "scorer_kind": measure.KindUser, "scoring_prompt": res.Body, "self_improvement_enabled": sc.SelfImprovement,
		"agent_config": map[string]any{}, "result_count": count, "last_scored_at": last, "version": 1, "created_at": res.CreatedAt,
		"updated_at": res.UpdatedAt, "file": res.File, "pass_rate_summary": summary}, nil
}

// scorerStatsQuery is what a scorer list asks of each scorer's
// pass_rate_summary: its recent_outcomes_limit, or a window.
type scorerStatsQuery struct {
	limit      int
	start, end *time.Time
}

// statsQuery reads a scorer list's recent_outcomes_limit (1..100, default
// 50) and start_date/end_date (both or neither, start before end).
func statsQuery(r *http.Request) (scorerStatsQuery, error) {
	v := r.URL.Query()
	q := scorerStatsQuery{limit: 50}
	if raw := v.Get("recent_outcomes_limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 100 {
			return q, errorf(CodeInvalidRequest, "recent_outcomes_limit: a whole number from 1 to 100")
		}
		q.limit = n
	}
	start, end := v.Get("start_date"), v.Get("end_date")
	if (start == "") != (end == "") {
		return q, errorf(CodeInvalidRequest, "start_date and end_date: give both or neither")
	}
	if start != "" {
		s, err1 := time.Parse(time.RFC3339, start)
		e, err2 := time.Parse(time.RFC3339, end)
		if err1 != nil || err2 != nil || !s.Before(e) {
			return q, errorf(CodeInvalidRequest, "start_date and end_date: RFC 3339 times, start_date before end_date")
		}
		q.start, q.end, q.limit = &s, &e, 100
	}
	return q, nil
}

// factoryResources reads the factories (one, by UID, or all) with their
// applied resources of a kind and their agents' UIDs.
func (s *Server) eachFactoryResource(factoryUID, kind string, fn func(f *factory.Factory, res *factory.Resource, agents map[string]string)) error {
	fs, err := s.store.Factories()
	if err != nil {
		return err
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	for _, f := range fs {
		if factoryUID != "" && f.UID != factoryUID {
			continue
		}
		all, err := s.store.Resources(f.Name, "")
		if err != nil {
			return err
		}
		agents := map[string]string{}
		for _, r := range all {
			if r.Kind == factory.ResourceAgent {
				agents[r.Key] = r.UID
			}
		}
		for _, r := range all {
			if r.Kind == kind {
				fn(f, r, agents)
			}
		}
	}
	return nil
}

// listScorers is GET /v1/factory/scorers?factory_uid=: the user
// scorers (a benchmark's built-in correctness scorer is its own, not
// listed).
func (s *Server) listScorers(w http.ResponseWriter, r *http.Request) error {
	q, err := statsQuery(r)
	if err != nil {
		return err
	}
	out := []map[string]any{}
	err = s.eachFactoryResource(r.URL.Query().Get("factory_uid"), factory.ResourceScorer, func(f *factory.Factory, res *factory.Resource, agents map[string]string) {
		o, oerr := s.scorerObject(f, res, agents, q)
		if oerr != nil {
			err = oerr
		}
		out = append(out, o)
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"scorers": out})
	return nil
}

// suiteSpec is what benchmarks/<suite>/suite.yaml says.
type suiteSpec struct {
	Name           string           `json:"name"`
	Description    string           `json:"description"`
	Agent          string           `json:"agent"`
	Configurations []map[string]any `json:"configurations"`
	Tasks          []string         `json:"tasks"`
}

// suiteObject is an applied suite as the SDKs' suite (with its tasks when
// full).
func (s *Server) suiteObject(f *factory.Factory, res *factory.Resource, agents map[string]string, full bool) map[string]any {
	var sp suiteSpec
	_ = json.Unmarshal(res.Spec, &sp)
	name := sp.Name
	if name == "" {
		name = res.Key
	}
	agentType := factory.AgentCustom
	if a, err := s.store.Resource(f.Name, factory.ResourceAgent, sp.Agent); err == nil {
		var as factory.AgentSpec
		_ = json.Unmarshal(a.Spec, &as)
		if as.AgentType != "" {
			agentType = strings.Replace(as.AgentType, factory.AgentMain, factory.AgentForeman, 1)
		}
	}
	o := map[string]any{"uid": res.UID, "name": name, "factory_uid": f.UID, "agent_uid": agents[sp.Agent], "factory_agent_type": agentType,
		"created_at": res.CreatedAt, "updated_at": res.UpdatedAt, "file": res.File}
	if sp.Description != "" {
		o["description"] = sp.Description
	}
	if len(sp.Configurations) > 0 {
		o["configurations"] = configurationObjects(sp.Configurations, agents)
	}
	if full {
		o["spawnable_descendant_agent_uids"] = []string{}
		o["tasks"] = taskObjects(res, sp.Tasks)
	}
	return o
}

// configurationObjects are a suite's configurations as the SDKs'
// (role, display_name, agent_configs; the older form's model or harness).
func configurationObjects(confs []map[string]any, agents map[string]string) []map[string]any {
	out := []map[string]any{}
	for _, c := range confs {
		role, _ := c["role"].(string)
		if b, _ := c["baseline"].(bool); b {
			role = "baseline"
		}
		if role == "" {
			role = "candidate"
		}
		o := map[string]any{"role": role, "display_name": c["name"]}
		model, harness, auth := modelHarness(c)
		for k, v := range map[string]string{"model": model, "harness": harness, "harness_auth_secret_name": auth} {
			if v != "" {
				o[k] = v
			}
		}
		var acs []map[string]any
		list, _ := c["agents"].([]any)
		for _, a := range list {
			am, _ := a.(map[string]any)
			name, _ := am["agent"].(string)
			model, harness, auth := modelHarness(am)
			ac := map[string]any{"agent_uid": agents[name], "agent_name": name, "model": model, "harness": harness}
			if auth != "" {
				ac["harness_auth_secret_name"] = auth
			}
			acs = append(acs, ac)
		}
		if acs != nil {
			o["agent_configs"] = acs
		}
		out = append(out, o)
	}
	return out
}

// modelHarness reads model or harness of a configuration or its agent:
// model alone is the oz harness.
func modelHarness(m map[string]any) (model, harness, auth string) {
	if v, ok := m["model"].(string); ok {
		return v, factory.HarnessOz, ""
	}
	h, _ := m["harness"].(map[string]any)
	model, _ = h["model"].(string)
	harness, _ = h["type"].(string)
	if harness == "claude-code" {
		harness = factory.HarnessClaude
	}
	if a, ok := h["auth"].(map[string]any); ok {
		auth, _ = a["secretName"].(string)
	}
	return model, harness, auth
}

// taskObjects are a suite's tasks as the SDKs', in the suite's order.
func taskObjects(res *factory.Resource, names []string) []map[string]any {
	out := []map[string]any{}
	for _, n := range names {
		var t struct {
			Title            string   `json:"title"`
			Prompt           string   `json:"prompt"`
			SuccessCriteria  any      `json:"successCriteria"`
			SourceRunID      string   `json:"sourceRunId"`
			StartingRepoRefs []string `json:"startingRepoRefs"`
		}
		_ = json.Unmarshal(res.Files[n], &t)
		criteria, _ := t.SuccessCriteria.(string)
		if list, ok := t.SuccessCriteria.([]any); ok {
			for _, c := range list {
				criteria += fmt.Sprintf("- %v\n", c)
			}
		}
		uid := factory.DerivedID("bt_", res.UID, n)
		o := map[string]any{"id": measure.NumericID(uid), "uid": uid, "name": n, "title": t.Title, "prompt": t.Prompt, "success_criteria": criteria}
		if t.SourceRunID != "" {
			o["source_run_id"] = t.SourceRunID
		}
		refs := []map[string]any{}
		for _, ref := range t.StartingRepoRefs {
			host, rest, _ := strings.Cut(ref, ":")
			repo, sha, _ := strings.Cut(rest, "@")
			owner, name, _ := strings.Cut(repo, "/")
			forge := factory.ForgeGitHub
			if host == "gitlab.com" {
				forge = factory.ForgeGitLab
			}
			refs = append(refs, map[string]any{"code_forge": forge, "owner": owner, "repo": name, "ref": sha})
		}
		if len(refs) > 0 {
			o["starting_repo_refs"] = refs
		}
		out = append(out, o)
	}
	return out
}

// listSuites is GET /v1/factory/{uid}/benchmarks/suites.
func (s *Server) listSuites(w http.ResponseWriter, r *http.Request) error {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	out := []map[string]any{}
	err = s.eachFactoryResource(f.UID, factory.ResourceSuite, func(f *factory.Factory, res *factory.Resource, agents map[string]string) {
		out = append(out, s.suiteObject(f, res, agents, false))
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"suites": out, "page_info": factory.PageInfo{}})
	return nil
}

// suiteOf finds a factory's suite by its UID.
func (s *Server) suiteOf(r *http.Request) (map[string]any, error) {
	f, err := s.factoryByUID(r.PathValue("uid"))
	if err != nil {
		return nil, err
	}
	var out map[string]any
	err = s.eachFactoryResource(f.UID, factory.ResourceSuite, func(f *factory.Factory, res *factory.Resource, agents map[string]string) {
		if res.UID == r.PathValue("suiteUid") {
			out = s.suiteObject(f, res, agents, true)
		}
	})
	if err == nil && out == nil {
		err = errorf(CodeNotFound, fmt.Sprintf("factory %s has no suite %s", f.Name, r.PathValue("suiteUid")))
	}
	return out, err
}

func (s *Server) getSuite(w http.ResponseWriter, r *http.Request) error {
	o, err := s.suiteOf(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, o)
	return nil
}
