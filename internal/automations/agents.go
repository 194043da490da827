package automations

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"factory"
	"factory/internal/runs"
	"factory/internal/store"
)

// CodeHarnessNotConfigured is the error code of a run whose agent's
// harness no environment of the server runs (docs/spec/v1alpha1.md).
const CodeHarnessNotConfigured = "harness_not_configured"

// AgentRun is what a factory's agent adds to a run it executes.
type AgentRun struct {
	prompt      string // the agent's prompt, to go before the run's own
	environment string
	setup       *factory.RunSetup
	files       map[string][]byte
	fail        *factory.StatusMessage
}

// Name is the agent's name.
func (o *AgentRun) Name() string { return o.setup.Agent }

// Apply makes req a run of the agent: the agent's prompt, then a "---"
// line, then req's prompt; the agent's environment unless req names one;
// its setup (skills, runner commands, harness settings); and the failure
// of a harness no environment runs.
func (o *AgentRun) Apply(req *runs.CreateRequest) {
	if p := strings.TrimSpace(o.prompt); p != "" {
		req.Prompt = p + "\n\n---\n\n" + req.Prompt
	}
	if req.Environment == "" {
		req.Environment = o.environment
	}
	req.Setup, req.SetupFiles, req.FailWith = o.setup, o.files, o.fail
}

// ResolveAgent resolves the agent that runs a piece of work (the named
// agent, else the foreman) and its execution settings, defaults ← agent ←
// over (docs/spec/v1alpha1.md): the harness picks the environment, the
// runner gives the setup commands, and the skills the agent sees are laid
// out in the workspace. A factory without agents (the flat layout) gives
// nil.
func ResolveAgent(s *store.Store, runs *runs.Manager, f *factory.Factory, name string, over *factory.ExecSettings) (*AgentRun, error) {
	byKind, err := LoadResources(s, f.Name)
	if err != nil {
		return nil, err
	}
	return resolveAgent(byKind, runs, f, name, over)
}

// Resources are a factory's applied resources, by kind, then key.
type Resources map[string]map[string]*factory.Resource

// LoadResources reads a factory's resources from the store.
func LoadResources(s *store.Store, factoryName string) (Resources, error) {
	res, err := s.Resources(factoryName, "")
	if err != nil {
		return nil, err
	}
	byKind := Resources{}
	for _, r := range res {
		if byKind[r.Kind] == nil {
			byKind[r.Kind] = map[string]*factory.Resource{}
		}
		byKind[r.Kind][r.Key] = r
	}
	return byKind, nil
}

// resolveAgent is ResolveAgent over resources already read.
func resolveAgent(byKind Resources, runs *runs.Manager, f *factory.Factory, name string, over *factory.ExecSettings) (*AgentRun, error) {
	agent, spec, err := pickAgent(byKind[factory.ResourceAgent], name)
	if agent == nil || err != nil {
		return nil, err
	}
	ex := factory.ExecSettings{}
	if f.Settings.AgentDefaults != nil {
		ex = *f.Settings.AgentDefaults
	}
	ex = ex.Resolve(spec.ExecSettings)
	if over != nil {
		ex = ex.Resolve(*over)
	}
	out := &AgentRun{prompt: agent.Body, files: map[string][]byte{},
		setup: &factory.RunSetup{Agent: agent.Key, AgentUID: agent.UID, Harness: ex.EffectiveHarness(), Runner: ex.Runner,
			WorkerHost: ex.WorkerHost, Budget: ex.Budget}}
	if rn := byKind[factory.ResourceRunner][ex.Runner]; rn != nil {
		var rs factory.RunnerSpec
		if err := json.Unmarshal(rn.Spec, &rs); err != nil {
			return nil, fmt.Errorf("runner %s: %w", rn.Key, err)
		}
		out.setup.SetupCommands = rs.SetupCommands
		out.setup.DockerImage, out.setup.InstanceShape = rs.Platform.Linux.DockerImage, rs.InstanceShape
	}
	out.addSkills(byKind[factory.ResourceSkill], agent.Key)
	out.setup.Secrets = grantedSecrets(f.Settings.Secrets, ex)
	out.setup.MCPServers = mcpServersOf(f.Settings.MCPServers, ex.MCPServers)
	out.pickEnvironment(runs, ex)
	return out, nil
}

// pickAgent returns the automation's agent, or the foreman when it names
// none; nil when the factory has no agents.
func pickAgent(agents map[string]*factory.Resource, name string) (*factory.Resource, *factory.AgentSpec, error) {
	for _, key := range slices.Sorted(maps.Keys(agents)) {
		r := agents[key]
		var spec factory.AgentSpec
		if err := json.Unmarshal(r.Spec, &spec); err != nil {
			return nil, nil, fmt.Errorf("agent %s: %w", r.Key, err)
		}
		if key == name || name == "" && spec.IsForeman() {
			return r, &spec, nil
		}
	}
	if name != "" {
		return nil, nil, fmt.Errorf("agent %q does not exist", name) // the plan refuses this first
	}
	return nil, nil, nil
}

// addSkills lays out the skills the agent sees: every shared skill, then
// the agent's own (which win over a shared one of the same name).
func (o *AgentRun) addSkills(skills map[string]*factory.Resource, agent string) {
	for _, key := range slices.Sorted(maps.Keys(skills)) {
		owner, name, own := strings.Cut(key, "/")
		if own && owner != agent {
			continue
		}
		if !own {
			name = key
			if _, shadowed := skills[agent+"/"+key]; shadowed {
				continue
			}
		}
		r := skills[key]
		dir := path.Join(factory.SkillsDirInWorkspace, name)
		o.add(path.Join(dir, factory.SkillFile), []byte(r.Body))
		for _, p := range slices.Sorted(maps.Keys(r.Files)) {
			o.add(path.Join(dir, p), r.Files[p])
		}
	}
}

func (o *AgentRun) add(p string, data []byte) {
	o.setup.Files = append(o.setup.Files, p)
	o.files[p] = data
}

// pickEnvironment maps the harness to an environment; an unmapped harness
// fails the run with a clear code rather than falling back silently.
func (o *AgentRun) pickEnvironment(runs *runs.Manager, ex factory.ExecSettings) {
	h := o.setup.Harness
	if h == nil || runs == nil {
		return
	}
	env, ok := runs.HarnessEnvironment(h.Type)
	if !ok {
		o.fail = &factory.StatusMessage{ErrorCode: CodeHarnessNotConfigured, Message: fmt.Sprintf(
			"agent %s runs on the %s harness, which no environment of this server runs: map it in the server config (runtime.harnesses.%s)",
			o.setup.Agent, h.Type, h.Type)}
		return
	}
	o.environment = env
}

// grantedSecrets are the managed secrets a run's agent gets: the factory's
// (always), the resolved settings' own, and the harness's credential, each
// once, in that order. The credential of a harness that reaches its model
// through the model gateway (claude, codex, gemini) is the gateway's to
// hold, never the agent's: it is not granted.
func grantedSecrets(factoryWide []string, ex factory.ExecSettings) []string {
	var out []string
	seen := map[string]bool{}
	add := func(names ...string) {
		for _, n := range names {
			if n != "" && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	add(factoryWide...)
	add(ex.Secrets...)
	if h := ex.EffectiveHarness(); h != nil && h.Auth != nil && h.Auth.Source == "managedSecret" && !throughGateway(h.Type) {
		add(h.Auth.SecretName)
	}
	return out
}

// mcpServersOf are the MCP servers a run's agent is offered: the
// factory's (always), then the resolved settings' own (which win over a
// factory server of the same name).
func mcpServersOf(factoryWide json.RawMessage, own map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	_ = json.Unmarshal(factoryWide, &out) // validated by the schema
	for k, v := range own {
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// throughGateway reports whether a harness reaches its model through the
// model gateway, which holds its key.
func throughGateway(harness string) bool {
	return harness == factory.HarnessClaude || harness == factory.HarnessCodex || harness == factory.HarnessGemini
}
