package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// ErrNoNPM is the error of an install where npm is not installed.
var ErrNoNPM = errors.New("npm is not installed (it installs the harnesses; https://nodejs.org)")

// Install installs the harness, at its pinned version, under root
// (<data>/harnesses/<name>), with npm: aside first, then moved into place
// whole, so that a half install is never taken for one. npm's output goes
// to out.
func (h Harness) Install(ctx context.Context, root string, out io.Writer) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return ErrNoNPM
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(root, ".install-"+h.Name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save", "--omit=dev",
		"--loglevel=error", h.Package+"@"+h.Version)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm install %s@%s: %w", h.Package, h.Version, err)
	}
	if _, err := os.Stat(filepath.Join(tmp, filepath.FromSlash(h.Program))); err != nil {
		return fmt.Errorf("%s@%s has no %s for this machine (%s)", h.Package, h.Version, h.Program, platform())
	}
	old := h.Dir(root) + ".old"
	_ = os.RemoveAll(old)
	if err := os.Rename(h.Dir(root), old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, h.Dir(root)); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// Exec replaces this process with the harness installed under root, its
// arguments after the harness's own: how a turn's command runs a harness
// wherever the turn runs (the control plane, or a worker with its own
// install).
func (h Harness) Exec(root string, args []string) error {
	if v := h.Installed(root); v == "" {
		return fmt.Errorf("the %s harness is not installed in %s: factory harnesses install %s", h.Name, root, h.Name)
	}
	cmd := append(h.Command(root), args...)
	path := cmd[0]
	if h.Node {
		p, err := exec.LookPath("node")
		if err != nil {
			return fmt.Errorf("the %s harness needs node, which is not installed: %w", h.Name, err)
		}
		path = p
	}
	return syscall.Exec(path, cmd, os.Environ())
}
