package backup_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"factory"

	"factory/internal/backup"
	"factory/internal/secrets"
	"factory/internal/store"
)

// fixture is a small store with a record of every kind, and its backup.
type fixture struct {
	data    string // the store's data directory
	archive []byte
	result  *backup.Result
	kr      *secrets.Keyring
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	t.Setenv(secrets.KeyEnv, "")
	f := &fixture{data: t.TempDir()}
	s, err := store.Open(f.data)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if f.kr, err = secrets.ForStore(s, f.data); err != nil {
		t.Fatal(err)
	}
	if _, _, err := secrets.Create(s, f.kr, "tok", []byte("a-token-value"), false, time.Now()); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	b := s.NewBatch()
	b.PutFactory(&factory.Factory{Name: "acme", UID: "fc_0000000000000000000acme"})
	b.PutWebhook(&factory.Webhook{Factory: "acme", Key: "hook", UID: "wh_0000000000000000hook01", SecretName: "tok"})
	b.PutAutomation(&factory.Automation{Factory: "acme", Key: "all", UID: "au_00000000000000000all01"})
	b.PutAPIKey("fk_the-key", &factory.APIKey{Name: "admin", Scope: factory.ScopeAdmin, CreatedAt: now})
	for _, id := range []string{"run_a", "run_b", "run_c"} {
		b.PutRun(&factory.Run{ID: id, State: factory.StateSucceeded, CreatedAt: now, UpdatedAt: now}, nil)
	}
	// Live at the instant: one in progress on this machine's process and a
	// worker's turn, one queued with its turn handed to the workers' queue.
	b.PutRun(&factory.Run{ID: "run_live", State: factory.StateInProgress, CreatedAt: now, UpdatedAt: now,
		Process: &factory.ProcessRef{PID: os.Getpid(), Start: 1}, Current: &factory.TurnRecord{Attempt: "at_1", Remote: true}, Worker: "w1"}, nil)
	b.PutRun(&factory.Run{ID: "run_waiting", State: factory.StateQueued, CreatedAt: now, UpdatedAt: now, RemoteTurn: "att_2"}, nil)
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		d := &factory.Delivery{ID: store.NewDeliveryID(now), WebhookUID: "wh_0000000000000000hook01", Label: factory.LabelAccepted, Time: now, RunIDs: []string{}}
		if err := s.RecordDelivery(d, []byte(`{"n":1}`), []string{"header:" + d.ID}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if f.result, err = backup.Take(s, &buf, backup.Options{Binary: "v-test"}); err != nil {
		t.Fatal(err)
	}
	f.archive = buf.Bytes()
	return f
}

// TestBackupAndRestore: a backup's manifest says what the store holds (and
// the key's fingerprint, not the key); it verifies, restores into a
// missing directory as a private store that reads like the original, and
// the secret opens with the original key.
func TestBackupAndRestore(t *testing.T) {
	f := newFixture(t)
	m := f.result.Manifest
	want := store.Counts{Factories: 1, Webhooks: 1, Automations: 1, Runs: 5, Deliveries: 5, Secrets: 1, APIKeys: 1}
	if m.Counts != want || m.StoreFormat != store.FormatVersion || m.Binary != "v-test" || m.SecretsKey != f.kr.Fingerprint() {
		t.Fatalf("manifest: %+v", m)
	}
	if f.result.Bytes != int64(len(f.archive)) || len(m.Files) == 0 {
		t.Fatalf("result: %d bytes, archive %d", f.result.Bytes, len(f.archive))
	}
	if first := entries(t, f.archive)[0]; first.hdr.Name != backup.ManifestName {
		t.Fatalf("first entry %s", first.hdr.Name)
	}
	key, _ := os.ReadFile(filepath.Join(f.data, secrets.KeyFile))
	if bytes.Contains(f.archive, bytes.TrimSpace(key)) {
		t.Fatal("the secrets key is in the backup")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(f.data, ".backup-checkpoint-*")); len(leftovers) > 0 {
		t.Errorf("checkpoints left behind: %v", leftovers)
	}
	if _, err := backup.Verify(bytes.NewReader(f.archive), backup.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	checkRestore(t, f, want)
}

// checkRestore restores the fixture's backup into a missing directory and
// reads the store there.
func checkRestore(t *testing.T, f *fixture, want store.Counts) {
	target := filepath.Join(t.TempDir(), "restored")
	r, err := backup.Restore(bytes.NewReader(f.archive), target, backup.RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Manifest.Counts != want || len(r.Migrated) != 0 || r.InProgress != 1 || r.Queued != 1 {
		t.Errorf("restored: %+v", r)
	}
	checkPrivate(t, target)
	s, err := store.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, _ := s.Counts(); got != want {
		t.Errorf("restored store counts %+v", got)
	}
	if v, err := secrets.Current(s, f.kr, "tok"); err != nil || string(v) != "a-token-value" {
		t.Errorf("the secret with the original key: %q %v", v, err)
	}
	if w, err := s.WebhookByUID("wh_0000000000000000hook01"); err != nil || w.Key != "hook" {
		t.Errorf("the webhook by its UID: %v %v", w, err)
	}
	// The live runs hold no handle on the machine or the queue they came
	// from; their states are for the server's start-up to change.
	for _, id := range []string{"run_live", "run_waiting"} {
		r, err := s.Run(id)
		if err != nil || r.Process != nil || r.RemoteTurn != "" || r.ClaimedTurn != "" {
			t.Errorf("%s after the restore: %+v %v", id, r, err)
		}
	}
	if r, _ := s.Run("run_live"); r.State != factory.StateInProgress || r.Worker != "w1" || r.Current == nil || r.Current.Remote {
		t.Errorf("run_live: %s on %q, turn %+v", r.State, r.Worker, r.Current)
	}
}

// checkPrivate: every folder of a restored store is 0700, every file 0600.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
}

// TestRestoreIntoAnEmptyDirectory: an existing empty directory takes the
// store (and becomes private); one that holds anything is refused and left
// as it was.
func TestRestoreIntoAnEmptyDirectory(t *testing.T) {
	f := newFixture(t)
	empty := t.TempDir()
	os.Chmod(empty, 0o755)
	if _, err := backup.Restore(bytes.NewReader(f.archive), empty, backup.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, empty)

	parent := t.TempDir()
	full := filepath.Join(parent, "full")
	os.Mkdir(full, 0o755)
	os.WriteFile(filepath.Join(full, "notes.txt"), []byte("mine"), 0o644)
	_, err := backup.Restore(bytes.NewReader(f.archive), full, backup.RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), full+" is not empty (it holds notes.txt): restore only into an empty or missing directory") {
		t.Fatalf("restore into a directory that holds a file: %v", err)
	}
	if names := list(t, full); len(names) != 1 {
		t.Errorf("the directory now holds %v", names)
	}
	if names := list(t, parent); len(names) != 1 {
		t.Errorf("the parent holds %v", names)
	}
}

func list(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// entry is one entry of an archive, to take archives apart and build
// tampered ones.
type entry struct {
	hdr  tar.Header
	body []byte
}

func entries(t testing.TB, archive []byte) []entry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []entry
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out = append(out, entry{hdr: *hdr, body: b})
	}
}

// build makes a tar.gz of entries; a header's Size is the body's unless
// set already.
func build(t testing.TB, es []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range es {
		h := e.hdr
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.body)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// withManifest rewrites the manifest entry.
func withManifest(t testing.TB, es []entry, edit func(m map[string]any)) []entry {
	var m map[string]any
	if err := json.Unmarshal(es[0].body, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ := json.Marshal(m)
	out := append([]entry(nil), es...)
	out[0] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: backup.ManifestName, Mode: 0o600}, body: b}
	return out
}

// grown is an entry one byte longer.
func grown(e entry) entry {
	e.body = append(append([]byte(nil), e.body...), 'x')
	e.hdr.Size = int64(len(e.body))
	return e
}

func files(m map[string]any) []any { return m["files"].([]any) }

// TestRestoreRefusesDamagedBackups: a truncated, corrupted or tampered
// backup, or one this binary cannot restore, is refused with a message
// that says what is wrong, and nothing is left in the target's folder.
func TestRestoreRefusesDamagedBackups(t *testing.T) {
	f := newFixture(t)
	good := f.archive
	es := entries(t, good)
	last := len(es) - 1
	largest := 1
	for i := range es[1:] {
		if len(es[i+1].body) > len(es[largest].body) {
			largest = i + 1
		}
	}
	flip := func(b []byte, i int) []byte {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		return c
	}
	changed := func(i int) []entry {
		c := append([]entry(nil), es...)
		c[i] = entry{hdr: es[i].hdr, body: flip(es[i].body, len(es[i].body)/2)}
		return c
	}
	for _, tc := range []struct {
		name, want string
		archive    []byte
		limits     backup.Limits
	}{
		{"empty", "not a backup: not a gzip stream", nil, backup.Limits{}},
		{"not gzip", "not a backup: not a gzip stream", []byte("PK\x03\x04 a zip file"), backup.Limits{}},
		{"truncated in the manifest", "the backup is truncated", good[:200], backup.Limits{}},
		{"truncated half way", "the backup is truncated", good[:len(good)/2], backup.Limits{}},
		{"truncated before the gzip trailer", "the backup is truncated", good[:len(good)-4], backup.Limits{}},
		{"a byte flipped in the compressed stream", "", flip(good, len(good)/2), backup.Limits{}},
		{"a file's bytes changed", "SHA-256", build(t, changed(largest)), backup.Limits{}},
		{"the manifest's checksum changed", "the manifest says", build(t, withManifest(t, es, func(m map[string]any) {
			files(m)[0].(map[string]any)["sha256"] = strings.Repeat("0", 64)
		})), backup.Limits{}},
		{"a file missing", "missing", build(t, es[:last]), backup.Limits{}},
		{"a file not in the manifest", "db/EXTRA: not in the manifest", build(t, append(append([]entry(nil), es...),
			entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "db/EXTRA", Mode: 0o600}, body: []byte("x")})), backup.Limits{}},
		{"a file twice", "found where the manifest lists", build(t, append(append([]entry(nil), es[:2]...), es[1:]...)), backup.Limits{}},
		{"files out of order", "found where the manifest lists", build(t, append([]entry{es[0], es[2], es[1]}, es[3:]...)), backup.Limits{}},
		{"a path that leaves the target", `files[0].path "db/../../outside": not a store file's name`, build(t, withManifest(t, es, func(m map[string]any) {
			files(m)[0].(map[string]any)["path"] = "db/../../outside"
		})), backup.Limits{}},
		{"an absolute path", `files[0].path "/etc/passwd"`, build(t, withManifest(t, es, func(m map[string]any) {
			files(m)[0].(map[string]any)["path"] = "/etc/passwd"
		})), backup.Limits{}},
		{"a path listed twice", "listed twice", build(t, withManifest(t, es, func(m map[string]any) {
			files(m)[1] = files(m)[0]
		})), backup.Limits{}},
		{"a symlink", "not a regular file", build(t, append([]entry{es[0], {hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: es[1].hdr.Name, Linkname: "/etc/passwd"}}}, es[2:]...)), backup.Limits{}},
		{"a size that is not the manifest's", "the manifest says", build(t, append([]entry{es[0], grown(es[1])}, es[2:]...)), backup.Limits{}},
		{"the manifest not first", "the first entry is", build(t, append(append([]entry(nil), es[1:]...), es[0])), backup.Limits{}},
		{"a manifest over the limit", "manifest.json: ", good, backup.Limits{ManifestBytes: 100, Files: 100, FileBytes: 1 << 30, TotalBytes: 1 << 30}},
		{"more files than the limit", "more than the 2 a backup may hold", good, backup.Limits{ManifestBytes: 1 << 20, Files: 2, FileBytes: 1 << 30, TotalBytes: 1 << 30}},
		{"a file over the limit", ".size", good, backup.Limits{ManifestBytes: 1 << 20, Files: 100, FileBytes: 10, TotalBytes: 1 << 30}},
		{"a total that does not add up", "but the files add up to", build(t, withManifest(t, es, func(m map[string]any) { m["total_bytes"] = 1 })), backup.Limits{}},
		{"a newer store format", "the backup holds a store of format 99 (made by factory v-test); this binary reads formats up to", build(t, withManifest(t, es, func(m map[string]any) { m["store_format"] = 99 })), backup.Limits{}},
		{"not a factory backup", `kind "etcd-snapshot": not a factory backup`, build(t, withManifest(t, es, func(m map[string]any) { m["kind"] = "etcd-snapshot" })), backup.Limits{}},
		{"counts that are not the store's", "its manifest says", build(t, withManifest(t, es, func(m map[string]any) {
			m["counts"].(map[string]any)["runs"] = 4
		})), backup.Limits{}},
		{"data after the gzip stream", "data after the end of the gzip stream", append(append([]byte(nil), good...), "more"...), backup.Limits{}},
		{"a second gzip stream", "data after the end of the gzip stream", append(append([]byte(nil), good...), build(t, es[:1])...), backup.Limits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			target := filepath.Join(parent, "restored")
			_, err := backup.Restore(bytes.NewReader(tc.archive), target, backup.RestoreOptions{Limits: tc.limits})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
			if left := list(t, parent); len(left) != 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}
