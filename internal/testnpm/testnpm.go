// Package testnpm installs packages from the npm registry for tests, at
// pinned versions, once per machine, into the user's cache folder: the
// providers' published API descriptions and payloads that fakes check
// against (never committed). A test skips, saying why, where npm is not
// there.
package testnpm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Package is the folder of an installed npm package (name@version),
// installed first if it is not yet.
func Package(t testing.TB, name, version string) string {
	t.Helper()
	dir, err := install(name, version)
	if errors.Is(err, exec.ErrNotFound) {
		t.Skipf("npm is not installed (it installs %s@%s for this test): %v", name, version, err)
	}
	if err != nil {
		t.Fatalf("installing %s@%s from npm: %v", name, version, err)
	}
	return dir
}

func install(name, version string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "factory-tests", "npm", filepath.FromSlash(name)+"@"+version)
	pkg := filepath.Join(root, "node_modules", filepath.FromSlash(name))
	if _, err := os.Stat(filepath.Join(pkg, "package.json")); err == nil {
		return pkg, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		return "", err
	}
	// Installed aside, then moved into place whole: tests of several
	// packages may install the same package at once.
	tmp, err := os.MkdirTemp(filepath.Dir(root), ".install-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("npm", "install", "--prefix", tmp, "--no-audit", "--no-fund", "--no-save", "--loglevel=error", name+"@"+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	if err := os.Rename(tmp, root); err != nil {
		if _, serr := os.Stat(filepath.Join(pkg, "package.json")); serr != nil {
			return "", err
		}
	}
	return pkg, nil
}
