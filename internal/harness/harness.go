// Package harness knows the agent programs the server runs over ACP out of
// the box (docs/spec/harnesses.md): Claude Code and Codex through their
// ACP adapters, Gemini CLI. Each is an npm package at a pinned version,
// installed under the data directory (factory harnesses install); each
// calls one model provider, through the server's model gateway; each reads
// its model and reasoning level, and its settings, its own way, from the
// run's environment and the run's own HOME.
package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// DirEnv names the harnesses' folder in a turn's environment: the host
// that runs the turn (the server, or a worker, each with its own install)
// sets it, and the turn's command (factory harnesses exec NAME) runs the
// harness installed there.
const DirEnv = "FACTORY_HARNESSES"

// Harness is one agent program.
type Harness struct {
	Name    string // claude, codex, gemini
	Package string // its npm package
	Version string // the version installed and tested
	// Provider is the model provider it calls (the gateway's name).
	Provider string
	// Program is what runs, inside its install folder; Node says it is a
	// script node runs. Args follow it.
	Program string
	Node    bool
	Args    []string
}

// Harnesses are the built-in harnesses, pinned.
var Harnesses = []Harness{
	{Name: "claude", Package: "@zed-industries/claude-agent-acp", Version: "0.23.1", Provider: "anthropic",
		Program: "node_modules/@zed-industries/claude-agent-acp/dist/index.js", Node: true},
	{Name: "codex", Package: "@zed-industries/codex-acp", Version: "0.16.0", Provider: "openai",
		Program: "node_modules/@zed-industries/codex-acp-" + platform() + "/bin/codex-acp"},
	{Name: "gemini", Package: "@google/gemini-cli", Version: "0.61.0", Provider: "gemini",
		Program: "node_modules/@google/gemini-cli/bundle/gemini.js", Node: true, Args: []string{"--acp"}},
}

// platform is the npm platform package suffix of this machine
// (linux-x64, darwin-arm64).
func platform() string {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	return runtime.GOOS + "-" + arch
}

// Lookup is the built-in harness of a name.
func Lookup(name string) (Harness, bool) {
	for _, h := range Harnesses {
		if h.Name == name {
			return h, true
		}
	}
	return Harness{}, false
}

// Names are the built-in harnesses' names.
func Names() []string {
	out := make([]string, len(Harnesses))
	for i, h := range Harnesses {
		out[i] = h.Name
	}
	return out
}

// Dir is where a harness is installed under a harnesses folder
// (<data>/harnesses).
func (h Harness) Dir(root string) string { return filepath.Join(root, h.Name) }

// Installed is the version of the harness installed under root, "" when
// it is not (or its program is missing).
func (h Harness) Installed(root string) string {
	pkg := filepath.Join(h.Dir(root), "node_modules", filepath.FromSlash(h.Package), "package.json")
	b, err := os.ReadFile(pkg)
	if err != nil {
		return ""
	}
	var p struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &p) != nil || p.Version == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(h.Dir(root), filepath.FromSlash(h.Program))); err != nil {
		return ""
	}
	return p.Version
}

// Command is the command that runs the harness installed under root.
func (h Harness) Command(root string) []string {
	prog := filepath.Join(h.Dir(root), filepath.FromSlash(h.Program))
	if h.Node {
		return append([]string{"node", prog}, h.Args...)
	}
	return append([]string{prog}, h.Args...)
}

// Turn is what a turn of the harness gets: its model and reasoning
// level, the gateway's address for its provider and the run's token as
// its key (the provider's own variables), and its settings files in the
// run's HOME (by path inside it). model and reasoning may be empty: the
// harness's own default then.
type Turn struct {
	Model, Reasoning string
	// GatewayURL is the gateway's address for the harness's provider
	// (<server>/v1/gateway/<provider>); Token the run's gateway token.
	GatewayURL, Token string
}

// Setup is what the turn's agent gets: its environment's variables and
// its HOME's files.
func (h Harness) Setup(t Turn) (env []string, home map[string][]byte) {
	switch h.Name {
	case "claude":
		return claudeSetup(t)
	case "codex":
		return codexSetup(t)
	case "gemini":
		return geminiSetup(t)
	}
	return nil, nil
}

// reasoningTokens are the thinking budgets of the reasoning levels, for
// the harnesses that take a number of tokens.
var reasoningTokens = map[string]int{"minimal": 1024, "low": 4096, "medium": 10000, "high": 24576, "xhigh": 31999, "max": 31999}

// claudeSetup: Claude Code reads its provider's address and key from
// ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY, its model from ANTHROPIC_MODEL
// (the adapter picks its "default" model, which ANTHROPIC_DEFAULT_*_MODEL
// name), and its thinking budget from MAX_THINKING_TOKENS.
func claudeSetup(t Turn) ([]string, map[string][]byte) {
	env := []string{"ANTHROPIC_BASE_URL=" + t.GatewayURL, "ANTHROPIC_API_KEY=" + t.Token,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1"}
	if t.Model != "" {
		for _, k := range []string{"ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL"} {
			env = append(env, k+"="+t.Model)
		}
	}
	if n, ok := reasoningTokens[strings.ToLower(t.Reasoning)]; ok {
		env = append(env, "MAX_THINKING_TOKENS="+strconv.Itoa(n))
	}
	return env, nil
}

// codexSetup: Codex reads its settings from $CODEX_HOME/config.toml
// ($HOME/.codex): the model, the reasoning effort, and the gateway as
// its model provider, whose key it reads from OPENAI_API_KEY. Commands
// run without Codex's own sandbox (it needs bubblewrap) and each asks the
// server's permission (approval_policy untrusted): the run's environment
// is the sandbox, the server's policy the judge.
func codexSetup(t Turn) ([]string, map[string][]byte) {
	var b strings.Builder
	if t.Model != "" {
		fmt.Fprintf(&b, "model = %s\n", strconv.Quote(t.Model))
	}
	if t.Reasoning != "" {
		fmt.Fprintf(&b, "model_reasoning_effort = %s\n", strconv.Quote(strings.ToLower(t.Reasoning)))
	}
	fmt.Fprintf(&b, "model_provider = \"factory\"\nsandbox_mode = \"danger-full-access\"\napproval_policy = \"untrusted\"\n")
	fmt.Fprintf(&b, "check_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n")
	fmt.Fprintf(&b, "[model_providers.factory]\nname = \"factory model gateway\"\nbase_url = %s\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n",
		strconv.Quote(t.GatewayURL+"/v1"))
	env := []string{"OPENAI_BASE_URL=" + t.GatewayURL + "/v1", "OPENAI_API_KEY=" + t.Token}
	return env, map[string][]byte{".codex/config.toml": []byte(b.String())}
}

// geminiSetup: Gemini CLI reads its provider's address and key from
// GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY, its model from GEMINI_MODEL,
// and its thinking budget from its settings' model config overrides.
func geminiSetup(t Turn) ([]string, map[string][]byte) {
	env := []string{"GOOGLE_GEMINI_BASE_URL=" + t.GatewayURL, "GEMINI_API_KEY=" + t.Token}
	if t.Model != "" {
		env = append(env, "GEMINI_MODEL="+t.Model)
	}
	settings := map[string]any{"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy": map[string]any{"usageStatisticsEnabled": false}, "general": map[string]any{"disableAutoUpdate": true}}
	if n, ok := reasoningTokens[strings.ToLower(t.Reasoning)]; ok && t.Model != "" {
		settings["modelConfigs"] = map[string]any{"customOverrides": []any{map[string]any{"match": map[string]any{"model": t.Model},
			"modelConfig": map[string]any{"generateContentConfig": map[string]any{"thinkingConfig": map[string]any{"thinkingBudget": n}}}}}}
	}
	b, _ := json.MarshalIndent(settings, "", "  ")
	return env, map[string][]byte{".gemini/settings.json": b}
}
