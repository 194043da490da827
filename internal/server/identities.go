package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strings"

	"factory"
)

// Agents and their identities (docs/agents-api.md, "Agents"): the
// factories' agents, defined by their files, are the server's named agents
// (GET /v1/agent/identities) and, with the skills, what GET /v1/agent
// lists. Files are their only source: the API reads them and refuses to
// create, change or delete one.

func (s *Server) identityRoutes(mux *routes) {
	read := func(h handler) http.Handler { return s.auth(h, factory.ScopeRuns, factory.ScopeRead) }
	admin := func(h handler) http.Handler { return s.auth(h, factory.ScopeAdmin) }
	mux.Handle("GET /v1/agent", read(s.listAgents))
	mux.Handle("GET /v1/agent/identities", read(s.listIdentities))
	mux.Handle("GET /v1/agent/identities/{uid}", read(s.getIdentity))
	mux.Handle("POST /v1/agent/identities", admin(s.createIdentity))
	mux.Handle("PUT /v1/agent/identities/{uid}", admin(s.updateIdentity))
	mux.Handle("DELETE /v1/agent/identities/{uid}", admin(s.deleteIdentity))
}

// factoryAgent is one agent of an applied factory, with what its runs
// resolve to (agentDefaults ← the agent).
type factoryAgent struct {
	f      *factory.Factory
	res    *factory.Resource
	spec   factory.AgentSpec
	exec   factory.ExecSettings
	skills []*factory.Resource // the skills it sees: the factory's, then its own
	runner string              // its runner's UID
}

// factoryAgents reads every factory's agents, by factory then name.
func (s *Server) factoryAgents() ([]*factoryAgent, error) {
	fs, err := s.store.Factories()
	if err != nil {
		return nil, err
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].Name < fs[j].Name })
	var out []*factoryAgent
	for _, f := range fs {
		res, err := s.store.Resources(f.Name, "")
		if err != nil {
			return nil, err
		}
		runners := map[string]string{}
		for _, r := range res {
			if r.Kind == factory.ResourceRunner {
				runners[r.Key] = r.UID
			}
		}
		for _, r := range res {
			if r.Kind != factory.ResourceAgent {
				continue
			}
			a := &factoryAgent{f: f, res: r}
			_ = json.Unmarshal(r.Spec, &a.spec)
			if d := f.Settings.AgentDefaults; d != nil {
				a.exec = *d
			}
			a.exec = a.exec.Resolve(a.spec.ExecSettings)
			a.runner = runners[a.exec.Runner]
			for _, sk := range res {
				owner, _, own := strings.Cut(sk.Key, "/")
				if sk.Kind == factory.ResourceSkill && (!own || owner == r.Key) {
					a.skills = append(a.skills, sk)
				}
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// definitionRepo names the repository a factory's files come from, as the
// SDKs name a skill's: owner and repository of a git URL; for a directory,
// "local" and the factory's key.
func definitionRepo(f *factory.Factory) (owner, repo string) {
	if u, err := url.Parse(f.Source); err == nil && u.Host != "" {
		p := strings.TrimSuffix(strings.Trim(u.Path, "/"), ".git")
		if dir, base := path.Split(p); dir != "" {
			return path.Base(strings.TrimSuffix(dir, "/")), base
		}
	}
	return "local", f.Name
}

// skillSpec is a definition file as the SDKs name skills:
// <owner>/<repo>:<path>.
func skillSpec(f *factory.Factory, file string) string {
	owner, repo := definitionRepo(f)
	return owner + "/" + repo + ":" + file
}

// agentType is an agent's type as the API spells it (MAIN is FOREMAN).
func (a *factoryAgent) agentType() string {
	switch t := a.spec.AgentType; t {
	case "":
		return factory.AgentCustom
	case factory.AgentMain:
		return factory.AgentForeman
	default:
		return t
	}
}

// identity is the agent as the SDKs' AgentResponse: its resolved
// execution settings, its prompt and the skills it sees.
func (a *factoryAgent) identity() map[string]any {
	secrets := slices.Concat(a.f.Settings.Secrets, a.exec.Secrets)
	refs := []factory.SecretRef{}
	for _, n := range secrets {
		if !slices.ContainsFunc(refs, func(r factory.SecretRef) bool { return r.Name == n }) {
			refs = append(refs, factory.SecretRef{Name: n})
		}
	}
	skills := []string{}
	for _, sk := range a.skills {
		skills = append(skills, skillSpec(a.f, sk.File))
	}
	defaults := (&factory.Settings{MCPServers: a.f.Settings.MCPServers, AgentDefaults: &a.exec}).AgentDefaultsObject(nil)
	credential := a.spec.CredentialStrategy
	if credential == "" {
		credential = a.f.Settings.CredentialStrategy
	}
	if credential == "" {
		credential = "EXECUTOR"
	}
	o := map[string]any{"uid": a.res.UID, "name": a.res.Key, "available": true, "created_at": a.res.CreatedAt, "updated_at": a.res.UpdatedAt,
		"default_runner_uid": a.runner, "secrets": refs, "skills": skills, "agent_type": a.agentType(),
		"memory":      map[string]any{"attached_stores": []any{}, "auto_memory": map[string]any{"enabled": false}},
		"description": nullable(a.spec.Description), "prompt": a.res.Body, "credential_strategy": credential,
		"factory_uid": a.f.UID, "mcp_servers": defaults.MCPServers, "worker_host": a.exec.WorkerHost,
		"on_behalf_of_enabled": false, "file": a.res.File, "factory": a.f.Name}
	if a.exec.EnvironmentID != "" {
		o["environment_id"] = a.exec.EnvironmentID
	}
	if defaults.Harness != nil {
		o["harness"] = defaults.Harness
		if defaults.Harness.Type == factory.HarnessOz {
			o["base_model"] = defaults.Harness.ModelID
		}
	}
	if defaults.HarnessAuthSecrets != nil {
		o["harness_auth_secrets"] = defaults.HarnessAuthSecrets
	}
	return o
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// listIdentities is GET /v1/agent/identities?factory_uid=: the factories'
// agents.
func (s *Server) listIdentities(w http.ResponseWriter, r *http.Request) error {
	agents, err := s.factoryAgents()
	if err != nil {
		return err
	}
	only := r.URL.Query().Get("factory_uid")
	out := []map[string]any{}
	for _, a := range agents {
		if only == "" || a.f.UID == only {
			out = append(out, a.identity())
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
	return nil
}

// agentByUID finds a factory's agent by its UID.
func (s *Server) agentByUID(uid string) (*factoryAgent, error) {
	agents, err := s.factoryAgents()
	if err != nil {
		return nil, err
	}
	for _, a := range agents {
		if a.res.UID == uid {
			return a, nil
		}
	}
	return nil, errorf(CodeNotFound, fmt.Sprintf("no agent %s", uid))
}

func (s *Server) getIdentity(w http.ResponseWriter, r *http.Request) error {
	a, err := s.agentByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.identity())
	return nil
}

// filesOnly is the answer to a request to create, change or delete an
// agent: the factory's files define them.
func filesOnly(what string) error {
	return errorf(CodeOperationNotSupported, what+": agents are defined by their factory's files (agents/<name>/agent.md in the factory's repository); change the files, and the server applies them")
}

// createIdentity is POST /v1/agent/identities: checked as the SDKs send
// it, and refused (422): agents come from files.
func (s *Server) createIdentity(w http.ResponseWriter, r *http.Request) error {
	var q struct {
		Name string `json:"name"`
	}
	if _, err := readJSON(r, 1<<20, &q); err != nil {
		return err
	}
	if strings.TrimSpace(q.Name) == "" {
		return errorf(CodeInvalidRequest, "name: required")
	}
	return filesOnly("creating agent " + q.Name)
}

// updateIdentity is PUT /v1/agent/identities/{uid}: 404 for an unknown
// agent, 422 for one of a factory.
func (s *Server) updateIdentity(w http.ResponseWriter, r *http.Request) error {
	var q map[string]any
	if _, err := readJSON(r, 1<<20, &q); err != nil {
		return err
	}
	a, err := s.agentByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	return filesOnly(fmt.Sprintf("changing agent %s (%s of factory %s)", a.res.Key, a.res.File, a.f.Name))
}

// deleteIdentity is DELETE /v1/agent/identities/{uid}: as update.
func (s *Server) deleteIdentity(w http.ResponseWriter, r *http.Request) error {
	a, err := s.agentByUID(r.PathValue("uid"))
	if err != nil {
		return err
	}
	return filesOnly(fmt.Sprintf("deleting agent %s (%s of factory %s)", a.res.Key, a.res.File, a.f.Name))
}

// listAgents is GET /v1/agent: the factories' agents and skills as the
// SDKs' AgentSkill, one variant per factory that defines the name (a
// skill: per file). repo=<owner>/<repo> keeps the variants of one
// definition repository.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	agents, err := s.factoryAgents()
	if err != nil {
		return err
	}
	byName := map[string][]map[string]any{}
	seen := map[string]bool{}
	for _, a := range agents {
		env := s.agentEnvironments(a)
		byName[a.res.Key] = append(byName[a.res.Key], variant(a.f, a.res.File, a.res.Body, a.spec.Description, env))
		for _, sk := range a.skills {
			if id := skillSpec(a.f, sk.File); !seen[id] {
				seen[id] = true
				var front struct {
					Name        string `json:"name"`
					Description string `json:"description"`
				}
				_ = json.Unmarshal(sk.Spec, &front)
				name := front.Name
				if name == "" {
					name = path.Base(sk.Key)
				}
				byName[name] = append(byName[name], variant(a.f, sk.File, sk.Body, front.Description, env))
			}
		}
	}
	repo := r.URL.Query().Get("repo")
	out := []map[string]any{}
	names := mapsKeys(byName)
	sort.Strings(names)
	for _, name := range names {
		var vs []map[string]any
		for _, v := range byName[name] {
			src := v["source"].(map[string]any)
			if repo == "" || strings.EqualFold(src["owner"].(string)+"/"+src["name"].(string), repo) {
				vs = append(vs, v)
			}
		}
		if len(vs) > 0 {
			out = append(out, map[string]any{"name": name, "variants": vs})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": out})
	return nil
}

func mapsKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// variant is one definition file as an AgentSkill variant.
func variant(f *factory.Factory, file, body, description string, envs []map[string]any) map[string]any {
	owner, repo := definitionRepo(f)
	return map[string]any{"id": skillSpec(f, file), "base_prompt": body, "description": description, "environments": envs,
		"source": map[string]any{"owner": owner, "name": repo, "skill_path": file}, "factory_uid": f.UID}
}

// agentEnvironments is the environment an agent's runs execute in: the one
// its harness maps to, or the default.
func (s *Server) agentEnvironments(a *factoryAgent) []map[string]any {
	if s.cfg.Runs == nil {
		return []map[string]any{}
	}
	env := s.cfg.Runs.DefaultEnvironment()
	if h := a.exec.EffectiveHarness(); h != nil {
		e, ok := s.cfg.Runs.HarnessEnvironment(h.Type)
		if !ok {
			return []map[string]any{}
		}
		env = e
	}
	return []map[string]any{{"name": env, "uid": factory.DerivedID("env_", env)}}
}
