package runtime

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"factory/internal/confine"
)

// Confinement is how a turn's agent (and its setup commands) are confined
// on this machine (package confine: Landlock): to the run's own folders
// (workspace, output, home, temporary folder) read-write, the system's
// folders and the agent's own program read-only, nothing else; Hidden are
// never reached even below those (the data directory, credentials files),
// ReadOnly are more paths the agent reads, even inside a hidden one (an
// environment's readOnly, the harnesses installed in the data directory).
type Confinement struct {
	Hidden   []string
	ReadOnly []string
}

// TmpDir is the run's own temporary folder, beside the workspace
// (TMPDIR where the agent is confined).
func (t *Turn) TmpDir() string { return filepath.Join(t.Dir, "tmp") }

// policy is the confinement of a turn's process that runs args (the
// agent's command; nil for a setup command), nil when the turn is not
// confined. The harness's programs are read-only: the folder of each
// absolute path the command names (its program, a program a shell's
// script runs), unless it lies in a hidden folder.
func (t *Turn) policy(args []string) *confine.Policy {
	if t.Confine == nil {
		return nil
	}
	p := &confine.Policy{ReadWrite: []string{t.Workspace(), t.OutputDir(), t.Home(), t.TmpDir()},
		Granted: t.Confine.ReadOnly, Hidden: t.Confine.Hidden}
	for _, arg := range args {
		for _, word := range strings.Fields(arg) {
			word = strings.Trim(word, `"';&|()`)
			if !filepath.IsAbs(word) {
				continue
			}
			if fi, err := os.Stat(word); err == nil && fi.Mode().IsRegular() {
				p.ReadOnly = append(p.ReadOnly, filepath.Dir(word))
			}
		}
	}
	return p
}

// startConfined starts cmd, confined by p first when set: from a thread of
// its own, restricted and never used again (it ends with its goroutine).
func startConfined(cmd *exec.Cmd, p *confine.Policy) error {
	if p == nil {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		goruntime.LockOSThread() // never unlocked: the restricted thread ends with this goroutine
		if err := p.Restrict(); err != nil {
			errc <- fmt.Errorf("confining the agent: %w", err)
			return
		}
		errc <- cmd.Start()
	}()
	return <-errc
}
