package harness_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"factory/internal/harness"
)

// TestHarnessSetupCarriesModelReasoningAndToken: each harness reads its
// model, reasoning level, the gateway's address and the run's token its
// own way; the run's token is the only key it gets.
func TestHarnessSetupCarriesModelReasoningAndToken(t *testing.T) {
	turn := harness.Turn{Model: "m-1", Reasoning: "High", GatewayURL: "http://gw/v1/gateway/p", Token: "run-token"}
	claude, _ := harness.Lookup("claude")
	env, home := claude.Setup(turn)
	for _, want := range []string{"ANTHROPIC_BASE_URL=http://gw/v1/gateway/p", "ANTHROPIC_API_KEY=run-token", "ANTHROPIC_MODEL=m-1", "MAX_THINKING_TOKENS=24576"} {
		if !slices.Contains(env, want) {
			t.Errorf("claude: no %s in %v", want, env)
		}
	}
	if home != nil {
		t.Errorf("claude: home files %v", home)
	}

	codex, _ := harness.Lookup("codex")
	env, home = codex.Setup(turn)
	if !slices.Contains(env, "OPENAI_API_KEY=run-token") {
		t.Errorf("codex: no token in %v", env)
	}
	toml := string(home[".codex/config.toml"])
	for _, want := range []string{`model = "m-1"`, `model_reasoning_effort = "high"`, `base_url = "http://gw/v1/gateway/p/v1"`, `env_key = "OPENAI_API_KEY"`} {
		if !strings.Contains(toml, want) {
			t.Errorf("codex: no %s in\n%s", want, toml)
		}
	}

	gemini, _ := harness.Lookup("gemini")
	env, home = gemini.Setup(turn)
	for _, want := range []string{"GOOGLE_GEMINI_BASE_URL=http://gw/v1/gateway/p", "GEMINI_API_KEY=run-token", "GEMINI_MODEL=m-1"} {
		if !slices.Contains(env, want) {
			t.Errorf("gemini: no %s in %v", want, env)
		}
	}
	var settings map[string]any
	if err := json.Unmarshal(home[".gemini/settings.json"], &settings); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(home[".gemini/settings.json"]), `"thinkingBudget": 24576`) {
		t.Errorf("gemini: no thinking budget in %s", home[".gemini/settings.json"])
	}
}

// TestHarnessSetupWithoutModelLeavesTheDefault: no model, no reasoning
// level: the harness's own defaults.
func TestHarnessSetupWithoutModelLeavesTheDefault(t *testing.T) {
	for _, h := range harness.Harnesses {
		env, home := h.Setup(harness.Turn{GatewayURL: "http://gw", Token: "tok"})
		for _, kv := range env {
			if strings.Contains(kv, "MODEL=") || strings.HasPrefix(kv, "MAX_THINKING_TOKENS=") {
				t.Errorf("%s: %s without a model", h.Name, kv)
			}
		}
		for p, b := range home {
			if strings.Contains(string(b), "model =") || strings.Contains(string(b), "thinkingBudget") {
				t.Errorf("%s: %s names a model:\n%s", h.Name, p, b)
			}
		}
	}
}

// TestHarnessInstalled: a harness is installed when its package and its
// program are there; its version is its package's.
func TestHarnessInstalled(t *testing.T) {
	root := t.TempDir()
	h, _ := harness.Lookup("gemini")
	if v := h.Installed(root); v != "" {
		t.Fatalf("installed %q in an empty folder", v)
	}
	pkg := filepath.Join(h.Dir(root), "node_modules", filepath.FromSlash(h.Package))
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version": "9.9.9"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if v := h.Installed(root); v != "" {
		t.Fatalf("installed %q without its program", v)
	}
	prog := filepath.Join(h.Dir(root), filepath.FromSlash(h.Program))
	if err := os.MkdirAll(filepath.Dir(prog), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if v := h.Installed(root); v != "9.9.9" {
		t.Fatalf("installed %q, want 9.9.9", v)
	}
	if cmd := h.Command(root); cmd[0] != "node" || cmd[1] != prog || cmd[2] != "--acp" {
		t.Errorf("command %v", cmd)
	}
}
