// Package testbin builds the factory binary once per test process, for the
// tests that start it as a real process (a control plane, workers, the demo
// agent).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	err  error
)

// Factory is the path of a factory binary built from this tree, once.
func Factory(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, e := os.MkdirTemp("", "factory-bin")
		if e != nil {
			err = e
			return
		}
		path = filepath.Join(dir, "factory")
		// Static (no cgo): the docker backend's tests run it inside a
		// container of an image with no C library.
		cmd := exec.Command("go", "build", "-o", path, "factory/cmd/factory")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, e := cmd.CombinedOutput(); e != nil {
			err = fmt.Errorf("build: %v\n%s", e, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}
