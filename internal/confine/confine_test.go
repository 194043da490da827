package confine

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// TestGrantsCarveHiddenPaths: a folder granted with a hidden path below it
// is granted entry by entry, the hidden one (and a link into it) left out.
func TestGrantsCarveHiddenPaths(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a", "b", "data/runs/r1", "data/keys"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o600)
	os.Symlink(filepath.Join(root, "data", "keys"), filepath.Join(root, "c"))
	real, _ := filepath.EvalSymlinks(root)
	var got []string
	for _, g := range grants([]string{root}, resolveAll([]string{filepath.Join(root, "data")}), true) {
		got = append(got, g.path)
	}
	want := []string{filepath.Join(real, "a"), filepath.Join(real, "b"), filepath.Join(real, "file")}
	if !slices.Equal(got, want) {
		t.Errorf("granted %v, want %v", got, want)
	}
	if g := grants([]string{filepath.Join(root, "data", "runs")}, resolveAll([]string{filepath.Join(root, "data")}), true); len(g) != 0 {
		t.Errorf("a system folder inside a hidden one: %v", g)
	}
}

// TestRestrict: a process started from a restricted thread writes its own
// folder, reads the system's, and reaches nothing else.
func TestRestrict(t *testing.T) {
	if ABI() == 0 {
		t.Skip("this kernel has no Landlock")
	}
	own, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600)
	run := func(script string) error {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir = own
		errc := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if err := (Policy{ReadWrite: []string{own}, Hidden: []string{outside}}).Restrict(); err != nil {
				errc <- err
				return
			}
			errc <- cmd.Run()
		}()
		return <-errc
	}
	if err := run("echo mine > mine && cat mine && cat /etc/hostname >/dev/null"); err != nil {
		t.Errorf("its own folder and the system's: %v", err)
	}
	if err := run("cat " + filepath.Join(outside, "secret")); err == nil {
		t.Errorf("read a file outside")
	}
	if err := run("echo x > " + filepath.Join(outside, "planted")); err == nil {
		t.Errorf("wrote a file outside")
	}
}
