package apicheck

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// SharedDir is where the providers' published descriptions are kept for
// tests: $FACTORY_APIS, else shared/apis beside the module's folder (CI
// has the same folder).
func SharedDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("FACTORY_APIS"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder: cannot find the providers' API descriptions")
		}
		dir = parent
	}
	return filepath.Join(filepath.Dir(dir), "shared", "apis")
}

// SharedFile is a file of SharedDir; the test fails, naming it, when it is
// not there.
func SharedFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(SharedDir(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the providers' API description %s is not there (set FACTORY_APIS to the folder that holds it): %v", name, err)
	}
	return p
}

// Serve serves a test's fake of a provider (name) on loopback and returns
// its address; when the test ends, each problem the fake found in the
// requests it was sent fails the test.
func Serve(t testing.TB, name string, h http.Handler, problems *Problems) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		for _, p := range problems.List() {
			t.Errorf("fake %s: %s", name, p)
		}
	})
	return srv.URL
}
