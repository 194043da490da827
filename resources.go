package factory

import (
	"encoding/json"
	"time"
)

// The v1alpha1 format (docs/spec/v1alpha1.md) adds definitions beside
// webhooks and automations. Agents drive runs; runners prepare them;
// skills are offered to agents; scorers judge a sample of completed runs
// and benchmark suites run when launched (internal/measure).

// Resource kinds, as the store, the plan and status name them.
const (
	ResourceAgent  = "agent"
	ResourceRunner = "runner"
	ResourceScorer = "scorer"
	ResourceSuite  = "benchmark_suite"
	ResourceSkill  = "skill"
)

// ResourceKinds lists them in the order status prints them.
var ResourceKinds = []string{ResourceAgent, ResourceRunner, ResourceSkill, ResourceScorer, ResourceSuite}

// UID prefixes of the resources.
const (
	PrefixAgent  = "ag_"
	PrefixRunner = "rn_"
	PrefixScorer = "sc_"
	PrefixSuite  = "bs_"
	PrefixSkill  = "sk_"
)

// ResourcePrefix is the UID prefix of a resource kind.
func ResourcePrefix(kind string) string {
	switch kind {
	case ResourceAgent:
		return PrefixAgent
	case ResourceRunner:
		return PrefixRunner
	case ResourceScorer:
		return PrefixScorer
	case ResourceSuite:
		return PrefixSuite
	default:
		return PrefixSkill
	}
}

// Resource is an applied agent, runner, scorer, benchmark suite or skill.
// Its spec is the file's keys as canonical JSON; what a run needs of it is
// decoded where it is used (AgentSpec, RunnerSpec).
type Resource struct {
	Factory string `json:"factory"`
	Kind    string `json:"kind"`
	// Key is the resource's name: agents/<key>/agent.md; for a skill of
	// one agent, <agent>/<skill>.
	Key  string          `json:"key"`
	UID  string          `json:"uid"`
	File string          `json:"file"`
	Spec json.RawMessage `json:"spec"`
	// Body is the prompt of an agent or a scorer, the text of a SKILL.md.
	Body string `json:"body,omitempty"`
	// Files are a skill's other files, or a suite's tasks (canonical JSON),
	// by path inside the skill's folder or by task name.
	Files     map[string][]byte `json:"files,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// ExecSettings are the execution keys that agentDefaults, an agent and an
// automation may each set; a run resolves defaults ← agent ← automation.
type ExecSettings struct {
	Model         string                     `json:"model,omitempty"`
	Harness       *Harness                   `json:"harness,omitempty"`
	Runner        string                     `json:"runner,omitempty"`
	EnvironmentID string                     `json:"environmentId,omitempty"`
	Secrets       []string                   `json:"secrets,omitempty"`
	MCPServers    map[string]json.RawMessage `json:"mcpServers,omitempty"`
	WorkerHost    string                     `json:"workerHost,omitempty"`
	// Budget bounds what a run consumes (an extension); every layer
	// that sets one bounds it (Resolve keeps the smaller of each limit).
	Budget *Budget `json:"budget,omitempty"`
}

// Harness is the agent program of a run. Model alone is shorthand for
// {type: oz, model}.
type Harness struct {
	Type           string       `json:"type"`
	Model          string       `json:"model,omitempty"`
	ReasoningLevel string       `json:"reasoningLevel,omitempty"`
	Auth           *HarnessAuth `json:"auth,omitempty"`
}

// HarnessAuth says where a harness's credentials come from.
type HarnessAuth struct {
	Source     string `json:"source"`
	SecretName string `json:"secretName,omitempty"`
}

// Harness types (claude-code is read as claude).
const (
	HarnessOz     = "oz"
	HarnessClaude = "claude"
	HarnessCodex  = "codex"
	HarnessGemini = "gemini"
)

// Resolve layers over on s: each key over sets replaces s's. model and
// harness are one setting: setting either replaces both. A budget does
// not replace: both bound the run, the smaller of each limit.
func (s ExecSettings) Resolve(over ExecSettings) ExecSettings {
	if over.Model != "" || over.Harness != nil {
		s.Model, s.Harness = over.Model, over.Harness
	}
	if over.Runner != "" {
		s.Runner = over.Runner
	}
	if over.EnvironmentID != "" {
		s.EnvironmentID = over.EnvironmentID
	}
	if over.Secrets != nil {
		s.Secrets = over.Secrets
	}
	if over.MCPServers != nil {
		s.MCPServers = over.MCPServers
	}
	if over.WorkerHost != "" {
		s.WorkerHost = over.WorkerHost
	}
	s.Budget = s.Budget.Tighter(over.Budget)
	return s
}

// EffectiveHarness is the harness a run executes: the harness, or
// {type: oz, model} for model alone; nil when neither is set.
func (s ExecSettings) EffectiveHarness() *Harness {
	if s.Harness != nil {
		h := *s.Harness
		if h.Type == "claude-code" {
			h.Type = HarnessClaude
		}
		return &h
	}
	if s.Model != "" {
		return &Harness{Type: HarnessOz, Model: s.Model}
	}
	return nil
}

// Agent types.
const (
	AgentCustom  = "CUSTOM"
	AgentForeman = "FOREMAN"
	AgentMain    = "MAIN" // an alias of FOREMAN
)

// AgentSpec is what agents/<name>/agent.md says.
type AgentSpec struct {
	Description        string `json:"description,omitempty"`
	AgentType          string `json:"agentType,omitempty"`
	CredentialStrategy string `json:"credentialStrategy,omitempty"`
	ExecSettings
}

// IsForeman reports whether the agent is the factory's foreman.
func (a *AgentSpec) IsForeman() bool { return a.AgentType == AgentForeman || a.AgentType == AgentMain }

// InstanceShape is the size of a runner's machine: a worker's docker
// backend makes it the container's CPU and memory limits.
type InstanceShape struct {
	VCPUs    int     `json:"vcpus,omitempty"`
	MemoryGB float64 `json:"memoryGb,omitempty"`
}

// RunnerSpec is what runners/<name>.yaml says, as far as a run needs it.
type RunnerSpec struct {
	Description   string         `json:"description,omitempty"`
	SetupCommands []string       `json:"setupCommands,omitempty"`
	InstanceShape *InstanceShape `json:"instanceShape,omitempty"`
	Platform      struct {
		OS    string `json:"os,omitempty"`
		Linux struct {
			DockerImage string `json:"dockerImage,omitempty"`
		} `json:"linux"`
	} `json:"platform"`
}
