package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"factory"
	"factory/internal/runtime"
)

// harnessOf is the harness a run's turn runs: its agent's, else its
// environment's (a run that names the environment of an installed harness).
func harnessOf(r *factory.Run, env Environment) string {
	if r.Setup != nil && r.Setup.Harness != nil && r.Setup.Harness.Type != "" {
		return r.Setup.Harness.Type
	}
	return env.Harness
}

// turnOf builds a turn of a run, once, from the store: what every host
// runs it from. A granted secret that cannot be read, or a file of the
// run's that is missing, ends the turn before it starts (ok false, with
// how).
func (m *Manager) turnOf(r *factory.Run) (*runtime.Turn, runtime.Result, bool) {
	env := m.cfg.Environments[r.Environment]
	kind, command, permissions, _ := runtime.Describe(env.Executor)
	t := &runtime.Turn{RunID: r.ID, Attempt: r.Current.Attempt, Number: r.Turns, Prompt: r.Prompt, FollowUp: r.Current.FollowUp,
		Executor: kind, Command: command, Permissions: permissions, IdleTimeout: m.idleTimeout(r), Timeout: env.Timeout,
		MCPServers: mcpServers(r), Dir: m.RunDir(r.ID), RunAs: env.RunAs, Worker: r.Worker, Session: r.AgentSession}
	if r.Setup != nil && r.Setup.Permissions != "" {
		t.Permissions = r.Setup.Permissions // the agent's, over its environment's
	}
	id, attempt := r.ID, r.Current.Attempt
	t.Approve = func(ctx context.Context, req runtime.ApprovalRequest) (runtime.ApprovalAnswer, error) {
		return m.Approve(ctx, id, attempt, req)
	}
	if res, ok := m.budgetLeft(r, t); !ok {
		return nil, res, false
	}
	if t.Worker == "" || t.Worker == legacyLocalWorker {
		t.Worker = workerHost(r)
	}
	granted, res, ok := m.grants(r.Setup)
	if !ok {
		return nil, res, false
	}
	t.Env = slices.Concat(env.Env, setupEnv(r.Setup), granted)
	if m.extras != nil {
		mcp, extra := m.extras(r)
		if len(mcp) > 0 && t.MCPServers == nil {
			t.MCPServers = map[string]json.RawMessage{}
		}
		for name, s := range mcp {
			t.MCPServers[name] = s // the server's own win over a same-named one of the run's
		}
		t.Env = append(t.Env, extra...)
	}
	if h := harnessOf(r, env); h != "" && m.cfg.HarnessSetup != nil {
		vars, home, fail := m.cfg.HarnessSetup(r, h)
		if fail != nil {
			return nil, *fail, false
		}
		t.Env, t.HomeFiles = append(t.Env, vars...), home
	}
	if res, ok := m.repositories(r, t); !ok {
		return nil, res, false
	}
	if err := m.files(r, t); err != nil {
		return nil, runtime.Result{State: factory.StateError, Message: "the run's files: " + err.Error()}, false
	}
	if s := r.Setup; s != nil {
		t.Runner, t.Image, t.Shape = s.Runner, s.DockerImage, s.InstanceShape
		if r.Turns == 1 {
			t.Setup = s.SetupCommands
		}
	}
	return t, runtime.Result{}, true
}

// budgetLeft gives the turn what the run's budget leaves of its time; a
// run whose budget is spent already ends FAILED, budget_exceeded, before
// its agent starts.
func (m *Manager) budgetLeft(r *factory.Run, t *runtime.Turn) (runtime.Result, bool) {
	if r.Setup == nil || r.Setup.Budget == nil {
		return runtime.Result{}, true
	}
	b := r.Setup.Budget
	if e := b.Exceeded(r.Spent, 0); e != nil {
		m.budgetEvent(r.ID, e)
		return runtime.Result{State: factory.StateFailed, Code: runtime.CodeBudgetExceeded, Message: e.Message()}, false
	}
	if d := b.Duration(); d > 0 {
		t.BudgetTime = d
		if r.Spent != nil {
			t.BudgetTime -= r.Spent.AgentTime
		}
	}
	return runtime.Result{}, true
}

// repositories gives the turn its run's repositories: what to clone,
// and tokens minted for it; a repository left out is said on the timeline.
// A code host that cannot mint a token ends the turn ERROR, retryable.
func (m *Manager) repositories(r *factory.Run, t *runtime.Turn) (runtime.Result, bool) {
	if len(r.Repositories) == 0 || m.cfg.Repositories == nil {
		return runtime.Result{}, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	access, err := m.cfg.Repositories(ctx, r)
	if errors.Is(err, ErrExternalAuthentication) {
		return runtime.Result{State: factory.StateFailed, Code: CodeExternalAuthenticationRequired, Message: err.Error()}, false
	}
	if err != nil {
		return runtime.Result{State: factory.StateError, Message: "reaching the run's repositories: " + err.Error()}, false
	}
	t.Checkout, t.Env = access.Checkout, append(t.Env, access.Env...)
	for _, n := range access.Notes {
		m.note(r.ID, factory.CheckoutSkipped+n)
	}
	return runtime.Result{}, true
}

// files reads the run's attachments and its skills' files from the store
// into the turn.
func (m *Manager) files(r *factory.Run, t *runtime.Turn) error {
	if len(r.Attachments) > 0 {
		t.Attachments = make(map[string][]byte, len(r.Attachments))
	}
	for _, a := range r.Attachments {
		data, err := m.cfg.Store.RunAttachment(r.ID, a.Name)
		if err != nil {
			return fmt.Errorf("attachment %s: %w", a.Name, err)
		}
		t.Attachments[a.Name] = data
	}
	if r.Setup == nil || len(r.Setup.Files) == 0 {
		return nil
	}
	t.Files = make(map[string][]byte, len(r.Setup.Files))
	for _, p := range r.Setup.Files {
		data, err := m.cfg.Store.RunAttachment(r.ID, setupFilePrefix+p)
		if err != nil {
			return fmt.Errorf("skill file %s: %w", p, err)
		}
		t.Files[p] = data
	}
	return nil
}

// mcpServers are the MCP servers offered to a run's agent: its factory's
// and its agent's (the run's setup), then those its creator gave in
// config.mcp_servers (by name; a later one of the same name wins).
func mcpServers(r *factory.Run) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	if r.Setup != nil {
		maps.Copy(out, r.Setup.MCPServers)
	}
	var cfg struct {
		MCP map[string]json.RawMessage `json:"mcp_servers"`
	}
	if json.Unmarshal(r.Config, &cfg) == nil {
		maps.Copy(out, cfg.MCP)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// workerHost is the worker a run names: its config's worker_host, else
// its agent's workerHost; warp (the product's own) names none.
func workerHost(r *factory.Run) string {
	var cfg struct {
		Host string `json:"worker_host"`
	}
	_ = json.Unmarshal(r.Config, &cfg)
	host := cfg.Host
	if host == "" && r.Setup != nil {
		host = r.Setup.WorkerHost
	}
	if host == "warp" {
		return ""
	}
	return host
}

func (m *Manager) idleTimeout(r *factory.Run) time.Duration {
	var cfg struct {
		Idle int `json:"idle_timeout_minutes"`
	}
	if json.Unmarshal(r.Config, &cfg) == nil && cfg.Idle > 0 {
		return time.Duration(cfg.Idle) * time.Minute
	}
	return m.cfg.DefaultIdleTimeout
}

// setupEnv tells the agent which factory agent it is and the harness
// settings it resolved to: model and reasoning level reach the agent
// program this way (docs/definitions.md).
func setupEnv(s *factory.RunSetup) []string {
	if s == nil {
		return nil
	}
	var env []string
	add := func(k, v string) {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	add("FACTORY_AGENT", s.Agent)
	if h := s.Harness; h != nil {
		add("FACTORY_HARNESS", h.Type)
		add("FACTORY_MODEL", h.Model)
		add("FACTORY_REASONING_LEVEL", h.ReasoningLevel)
	}
	if len(s.Files) > 0 {
		add("FACTORY_SKILLS_DIR", factory.SkillsDirInWorkspace)
	}
	return env
}

// CodeSecretUnavailable is the error code of a run whose granted secret
// cannot be read (it does not exist, or does not open).
const CodeSecretUnavailable = "secret_unavailable"

// grants reads the managed secrets granted to a run, as NAME=value for
// the agent's environment (a name that cannot be a variable's is upper
// cased, with other characters as '_'). A secret that cannot be read ends
// the run FAILED, naming it; values are never logged or stored.
func (m *Manager) grants(s *factory.RunSetup) ([]string, runtime.Result, bool) {
	if s == nil || len(s.Secrets) == 0 {
		return nil, runtime.Result{}, true
	}
	var env []string
	for _, name := range s.Secrets {
		var v []byte
		err := errors.New("this server grants no secrets to runs")
		if m.cfg.SecretValue != nil {
			v, err = m.cfg.SecretValue(name)
		}
		if err == nil && strings.IndexByte(string(v), 0) >= 0 {
			err = errors.New("its value holds a NUL byte, which an environment variable cannot")
		}
		if err != nil {
			return nil, runtime.Result{State: factory.StateFailed, Code: CodeSecretUnavailable,
				Message: fmt.Sprintf("secret %s is granted to agent %s but cannot be read: %v (factory secrets create %s)", name, s.Agent, err, name)}, false
		}
		env = append(env, EnvName(name)+"="+string(v))
	}
	return env, runtime.Result{}, true
}

// EnvName is the environment variable a granted secret becomes: its own
// name when that is a variable's name, else upper cased with every other
// character as '_' (deploy.key → DEPLOY_KEY).
func EnvName(secret string) string {
	ok := secret != "" && !(secret[0] >= '0' && secret[0] <= '9')
	for _, c := range secret {
		ok = ok && (c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9')
	}
	if ok {
		return secret
	}
	out := []byte(strings.ToUpper(secret))
	for i, c := range out {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			out[i] = '_'
		}
	}
	if len(out) == 0 || out[0] >= '0' && out[0] <= '9' {
		out = append([]byte{'_'}, out...)
	}
	return string(out)
}
