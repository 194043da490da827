package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"factory"
	"factory/internal/gateway"
	"factory/internal/harness"
	"factory/internal/runs"
	"factory/internal/server"
)

// TestHarnessEnvironments: runtime.harnesses wins, then a configured
// environment of the harness's name, then the installed harness's own
// environment, which alone is marked as running it; a harness neither
// mapped nor installed maps to nothing.
func TestHarnessEnvironments(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"claude", "codex", "gemini"} {
		h, _ := harness.Lookup(name)
		fakeInstall(t, dir, h)
	}
	envs := map[string]runs.Environment{"default": {}, "codex": {}}
	got, err := harnessEnvironments(envs, map[string]string{"claude": "default"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"claude": "default", "codex": "codex", "gemini": "gemini"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s maps to %q, want %q (%v)", k, got[k], v, got)
		}
	}
	if envs["default"].Harness != "" || envs["codex"].Harness != "" {
		t.Errorf("configured environments marked: %+v", envs)
	}
	if envs["gemini"].Harness != "gemini" || envs["gemini"].Executor == nil {
		t.Errorf("gemini's own environment: %+v", envs["gemini"])
	}
	if _, ok := envs["claude"]; ok {
		t.Error("an environment for claude, which runtime.harnesses maps")
	}

	empty := map[string]runs.Environment{"default": {}}
	got, err = harnessEnvironments(empty, nil, t.TempDir())
	if err != nil || len(got) != 0 || len(empty) != 1 {
		t.Errorf("nothing installed: %v %v %v", got, empty, err)
	}
}

// fakeInstall lays out what Installed looks for.
func fakeInstall(t *testing.T, root string, h harness.Harness) {
	t.Helper()
	pkg := filepath.Join(h.Dir(root), "node_modules", filepath.FromSlash(h.Package))
	prog := filepath.Join(h.Dir(root), filepath.FromSlash(h.Program))
	for _, d := range []string{pkg, filepath.Dir(prog)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version": "`+h.Version+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prog, nil, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestModelGatewayKeys: a harness whose provider has no key at the
// gateway is a plan warning and a run that ends at once FAILED,
// integration_not_configured; with a key (the provider's keySecret, or
// the agent's harness.auth over it) the turn gets the gateway and the
// run's token, never the key.
func TestModelGatewayKeys(t *testing.T) {
	secrets := map[string]string{"openai-key": "sk-openai-real", "own-key": "sk-own-real"}
	g := &modelGateway{tokens: &gateway.Tokens{Key: []byte("k")}, url: "http://factory/v1/gateway", harnesses: "/data/harnesses",
		secret: func(name string) ([]byte, error) {
			if v, ok := secrets[name]; ok {
				return []byte(v), nil
			}
			return nil, errors.New("no such secret")
		}}
	codex := &factory.Harness{Type: "codex", Model: "gpt-5-codex"}
	run := &factory.Run{ID: "run_1", Setup: &factory.RunSetup{Harness: codex}}
	if p := g.problem(codex); !strings.Contains(p, "gateway.providers.openai.keySecret") {
		t.Errorf("the plan warning: %q", p)
	}
	if _, _, fail := g.setup(run, "codex"); fail == nil || fail.Code != CodeIntegrationNotConfigured || fail.State != factory.StateFailed {
		t.Fatalf("no key: %+v", fail)
	}
	if p := g.problem(&factory.Harness{Type: "oz"}); p != "" {
		t.Errorf("oz needs no key: %q", p)
	}

	g.cfg.Providers = map[string]server.GatewayProvider{"openai": {KeySecret: "openai-key"}}
	env, home, fail := g.setup(run, "codex")
	if fail != nil || g.problem(codex) != "" {
		t.Fatalf("with a key: %+v %q", fail, g.problem(codex))
	}
	joined := strings.Join(env, "\n") + string(home[".codex/config.toml"])
	if !strings.Contains(joined, "OPENAI_API_KEY="+g.tokens.Mint("run_1")) || !strings.Contains(joined, "http://factory/v1/gateway/openai/v1") ||
		!strings.Contains(joined, `model = "gpt-5-codex"`) || !strings.Contains(joined, HarnessesEnv+"=/data/harnesses") {
		t.Errorf("the turn's setup:\n%s", joined)
	}
	if strings.Contains(joined, "sk-") {
		t.Errorf("a key in the turn's setup:\n%s", joined)
	}
	if k, err := g.key(run, "openai"); err != nil || string(k) != "sk-openai-real" {
		t.Errorf("the provider's key: %q %v", k, err)
	}
	// A codex run's token spends OpenAI's key only, not another provider's.
	g.cfg.Providers["anthropic"] = server.GatewayProvider{KeySecret: "openai-key"}
	if k, err := g.key(run, "anthropic"); err == nil || !strings.Contains(err.Error(), "calls openai, not anthropic") {
		t.Errorf("another provider's key for a codex run: %q %v", k, err)
	}
	delete(g.cfg.Providers, "anthropic")
	own := &factory.Run{ID: "run_2", Setup: &factory.RunSetup{Harness: &factory.Harness{Type: "codex",
		Auth: &factory.HarnessAuth{Source: "managedSecret", SecretName: "own-key"}}}}
	if k, err := g.key(own, "openai"); err != nil || string(k) != "sk-own-real" {
		t.Errorf("the agent's own key: %q %v", k, err)
	}
}
