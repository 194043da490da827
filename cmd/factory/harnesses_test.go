package main

import (
	"os"
	"path/filepath"
	"testing"

	"factory/internal/harness"
	"factory/internal/runs"
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
