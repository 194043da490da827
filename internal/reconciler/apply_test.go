package reconciler_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"factory/internal/reconciler"
	"factory/internal/secrets"
	"factory/internal/store"
)

func openApplier(t testing.TB, dir string) *reconciler.Applier {
	t.Helper()
	s, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := secrets.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &reconciler.Applier{Store: s, Keyring: kr}
}

func TestApplyKeepsUIDsAcrossReopen(t *testing.T) {
	data := t.TempDir()
	src := reconciler.DirSource{Root: repo(t, map[string]string{
		"webhooks/ci.yaml":   "",
		"webhooks/sw.yaml":   "authMode: signature\nsignatureScheme: standard-webhooks\n",
		"webhooks/link.yaml": "authMode: url_token\n",
	})}
	a := openApplier(t, data)
	c, _, err := a.Sync(context.Background(), "acme", src)
	if err != nil || !c.Plan.Valid() {
		t.Fatal(err, c.Plan.Diagnostics)
	}
	first, err := a.Store.FactoryState("acme")
	if err != nil {
		t.Fatal(err)
	}
	// Generated secrets have the format of their mode.
	for key, prefix := range map[string]string{"ci": "", "sw": "whsec_", "link": ""} {
		w := first.Webhooks[key]
		sealed, err := a.Store.SealedSecret(w.SecretName, w.SecretVersion)
		if err != nil {
			t.Fatal(err)
		}
		v, err := a.Keyring.Open(w.SecretName, sealed)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(v), prefix) || len(v) < 32 || (key == "link" && !secrets.URLSafe(v)) {
			t.Fatalf("%s: generated secret %q", key, v)
		}
	}
	a.Store.Close()

	a = openApplier(t, data)
	defer a.Store.Close()
	if _, _, err := a.Sync(context.Background(), "acme", src); err != nil {
		t.Fatal(err)
	}
	again, err := a.Store.FactoryState("acme")
	if err != nil {
		t.Fatal(err)
	}
	if again.Factory.UID != first.Factory.UID || again.Factory.ForemanUID != first.Factory.ForemanUID {
		t.Fatal("factory UIDs changed")
	}
	for k, w := range first.Webhooks {
		if again.Webhooks[k].UID != w.UID {
			t.Fatalf("webhook %s: UID %s became %s", k, w.UID, again.Webhooks[k].UID)
		}
	}
	if !again.Factory.AppliedAt.Equal(first.Factory.AppliedAt) {
		t.Fatal("a no-op sync wrote the store")
	}
}

func TestStoreFilesArePrivate(t *testing.T) {
	data := t.TempDir()
	a := openApplier(t, data)
	if _, _, err := a.Sync(context.Background(), "acme", reconciler.DirSource{Root: repo(t, map[string]string{"webhooks/a.yaml": ""})}); err != nil {
		t.Fatal(err)
	}
	a.Store.Close()
	err := filepath.Walk(data, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if p != data && fi.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	data := t.TempDir()
	s, err := store.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := store.Open(data); err == nil || !strings.Contains(err.Error(), store.ErrLocked.Error()) {
		t.Fatalf("second open: %v", err)
	}
}

// revisions for the crash test: A and B differ in every webhook, so a
// half-applied batch would show as a mix.
func crashRepos(t testing.TB, root string) (a, b string) {
	filesA, filesB := map[string]string{}, map[string]string{}
	for i := 0; i < 10; i++ {
		filesA[fmt.Sprintf("webhooks/a-%02d.yaml", i)] = "description: revision A\n"
		filesB[fmt.Sprintf("webhooks/b-%02d.yaml", i)] = "description: revision B\n"
	}
	write := func(dir string, files map[string]string) {
		for p, c := range files {
			full := filepath.Join(dir, p)
			os.MkdirAll(filepath.Dir(full), 0o755)
			os.WriteFile(full, []byte(c), 0o644)
		}
	}
	a, b = filepath.Join(root, "a"), filepath.Join(root, "b")
	write(a, filesA)
	write(b, filesB)
	return a, b
}

// TestApplyIsAtomicUnderSIGKILL runs applies in a child process, kills it
// with SIGKILL at random moments, and checks after each restart that the
// store holds exactly one whole revision.
func TestApplyIsAtomicUnderSIGKILL(t *testing.T) {
	if os.Getenv("FACTORY_CRASH_CHILD") != "" {
		crashChild()
		return
	}
	if testing.Short() {
		t.Skip("subprocess crash test")
	}
	root := t.TempDir()
	ra, rb := crashRepos(t, root)
	data := filepath.Join(root, "data")
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	checked := 0
	for round := 0; round < 6; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestApplyIsAtomicUnderSIGKILL$")
		cmd.Env = append(os.Environ(), "FACTORY_CRASH_CHILD=1", "CRASH_DATA="+data, "CRASH_A="+ra, "CRASH_B="+rb)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(100+rng.Intn(200)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		s, err := store.Open(data)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Factory("acme")
		if err != nil {
			s.Close()
			continue // killed before the first commit
		}
		whs, err := s.Webhooks("acme")
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, w := range whs {
			keys = append(keys, w.Key[:1])
		}
		sort.Strings(keys)
		checked++
		joined := strings.Join(keys, "")
		if joined != strings.Repeat("a", 10) && joined != strings.Repeat("b", 10) {
			t.Fatalf("round %d: store holds a mix of revisions: %s", round, joined)
		}
		if !strings.Contains(f.Source, "/"+joined[:1]) {
			t.Fatalf("round %d: factory record says %s but webhooks are of revision %s", round, f.Source, joined[:1])
		}
	}
	if checked == 0 {
		t.Fatal("the child never committed a revision: nothing was checked")
	}
}

func crashChild() {
	s, err := store.Open(os.Getenv("CRASH_DATA"))
	if err != nil {
		os.Exit(3)
	}
	kr, _ := secrets.LoadKeyring(os.Getenv("CRASH_DATA"))
	a := &reconciler.Applier{Store: s, Keyring: kr}
	srcs := []reconciler.Source{reconciler.DirSource{Root: os.Getenv("CRASH_A")}, reconciler.DirSource{Root: os.Getenv("CRASH_B")}}
	for i := 0; ; i++ {
		if _, _, err := a.Sync(context.Background(), "acme", srcs[i%2]); err != nil {
			os.Exit(4)
		}
	}
}
