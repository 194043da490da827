package artifacts

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"factory"
)

func TestParseManifest(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     int    // declarations read
		err      string // in the first error, if any
	}{
		{"empty", "", 0, ""},
		{"blank lines", "\n\n  \n", 0, ""},
		{"pull request", `{"artifact_type":"PULL_REQUEST","url":"https://github.com/o/r/pull/1","branch":"fix"}`, 1, ""},
		{"reference", `{"artifact_type":"EXTERNAL_REFERENCE","url":"https://linear.app/x/issue/X-1","reference_type":"linear_issue"}`, 1, ""},
		{"file description", `{"artifact_type":"FILE","file":"out/report.md","description":"the report"}`, 1, ""},
		{"plan", `{"artifact_type":"PLAN","file":"plan.md","title":"Plan"}`, 1, ""},
		{"two lines, one bad", "{\"artifact_type\":\"PULL_REQUEST\",\"url\":\"https://x/pull/1\"}\nnot json", 1, "artifacts.jsonl:2"},
		{"no type", `{"url":"https://x"}`, 0, "artifact_type: required"},
		{"unknown type", `{"artifact_type":"VIDEO","url":"https://x"}`, 0, `"VIDEO" is not one of`},
		{"unknown field", `{"artifact_type":"PULL_REQUEST","url":"https://x","colour":"red"}`, 0, "unknown field"},
		{"pr without url", `{"artifact_type":"PULL_REQUEST","branch":"b"}`, 0, "url: required"},
		{"pr with a file", `{"artifact_type":"PULL_REQUEST","url":"https://x","file":"a"}`, 0, "not a file"},
		{"javascript url", `{"artifact_type":"EXTERNAL_REFERENCE","url":"javascript:alert(1)"}`, 0, "not an http"},
		{"file url", `{"artifact_type":"EXTERNAL_REFERENCE","url":"file:///etc/passwd"}`, 0, "not an http"},
		{"plan without file", `{"artifact_type":"PLAN","title":"x"}`, 0, "names its file"},
		{"escaping path", `{"artifact_type":"FILE","file":"../secret"}`, 0, "not a clean path"},
		{"absolute path", `{"artifact_type":"FILE","file":"/etc/passwd"}`, 0, "not a clean path"},
		{"unclean path", `{"artifact_type":"FILE","file":"a/../b"}`, 0, "not a clean path"},
		{"manifest itself", `{"artifact_type":"FILE","file":"artifacts.jsonl"}`, 0, "manifest"},
		{"long title", `{"artifact_type":"PULL_REQUEST","url":"https://x","title":"` + strings.Repeat("t", 2000) + `"}`, 0, "title"},
		{"too large", strings.Repeat(" ", MaxManifestBytes+1), 0, "over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := ParseManifest([]byte(tc.in))
			if len(got) != tc.want {
				t.Errorf("read %d declarations, want %d (errors %v)", len(got), tc.want, errs)
			}
			switch {
			case tc.err == "" && len(errs) > 0:
				t.Errorf("unexpected errors: %v", errs)
			case tc.err != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), tc.err)):
				t.Errorf("errors %v, want one with %q", errs, tc.err)
			}
		})
	}
}

// FuzzParseManifest: no input panics, and whatever is accepted passes
// the checks a declaration must pass.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"artifact_type":"PULL_REQUEST","url":"https://github.com/o/r/pull/1","branch":"fix"}`))
	f.Add([]byte("{\"artifact_type\":\"FILE\",\"file\":\"a/b.md\"}\n\n{\"artifact_type\":\"PLAN\",\"file\":\"p.md\"}"))
	f.Add([]byte(`{"artifact_type":"EXTERNAL_REFERENCE","url":"http://x","metadata":{"a":[1,{"b":null}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		decls, _ := ParseManifest(data)
		for _, d := range decls {
			if err := d.check(); err != nil {
				t.Fatalf("accepted a declaration that fails its check: %v", err)
			}
			if d.File != "" && (strings.HasPrefix(d.File, "/") || strings.Contains("/"+d.File+"/", "/../")) {
				t.Fatalf("accepted a path outside the folder: %q", d.File)
			}
		}
	})
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCollect(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "server-key")
	write(t, filepath.Dir(secret), "server-key", "do not leak")
	write(t, dir, "SUMMARY.md", "# done")
	write(t, dir, "shots/home.png", "\x89PNG\r\n\x1a\nfake")
	write(t, dir, "plan.md", "1. do it")
	write(t, dir, ManifestName, strings.Join([]string{
		`{"artifact_type":"FILE","file":"SUMMARY.md","description":"what was done"}`,
		`{"artifact_type":"SCREENSHOT","file":"shots/home.png","description":"the home page"}`,
		`{"artifact_type":"PLAN","file":"plan.md","title":"The plan"}`,
		`{"artifact_type":"PULL_REQUEST","url":"https://github.com/o/r/pull/7","branch":"fix-7"}`,
		`{"artifact_type":"FILE","file":"missing.txt"}`,
		`garbage`,
	}, "\n"))
	if err := os.Symlink(secret, filepath.Join(dir, "leak")); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	found, problems := Collect(dir, Seen{}, now)
	byType := map[factory.ArtifactType]Found{}
	for _, f := range found {
		byType[f.Artifact.Type] = f
		if string(f.Bytes) == "do not leak" {
			t.Fatal("a symbolic link was followed out of the folder")
		}
	}
	if len(found) != 4 {
		t.Fatalf("found %d artifacts, want 4: %+v", len(found), found)
	}
	file := byType[factory.ArtifactFile].Artifact.Data
	if file.Filename != "SUMMARY.md" || file.Filepath != "SUMMARY.md" || file.SizeBytes != 6 || file.Description != "what was done" ||
		!strings.HasPrefix(file.MimeType, "text/markdown") || file.UID == "" {
		t.Errorf("file: %+v", file)
	}
	if shot := byType[factory.ArtifactScreenshot].Artifact.Data; shot.MimeType != "image/png" || shot.Description != "the home page" {
		t.Errorf("screenshot: %+v", shot)
	}
	if plan := byType[factory.ArtifactPlan]; plan.Artifact.Data.DocumentUID == "" || string(plan.Bytes) != "1. do it" {
		t.Errorf("plan: %+v", plan)
	}
	if pr := byType[factory.ArtifactPullRequest].Artifact.Data; pr.URL != "https://github.com/o/r/pull/7" || pr.Branch != "fix-7" {
		t.Errorf("pull request: %+v", pr)
	}
	all := strings.Join(problems, "\n")
	for _, want := range []string{"artifacts.jsonl:6", "leak: not a regular file", "missing.txt"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems do not say %q:\n%s", want, all)
		}
	}

	// A later turn reports only what is new or changed.
	seen := Seen{Digests: map[string]string{}, Count: len(found)}
	for _, f := range found {
		seen.Digests[f.Key] = f.Digest
	}
	write(t, dir, "SUMMARY.md", "# done, again")
	again, _ := Collect(dir, seen, now)
	if len(again) != 1 || again[0].Artifact.Data.Filepath != "SUMMARY.md" || again[0].Artifact.Data.UID == file.UID {
		t.Errorf("the second collection: %+v", again)
	}
}

func TestCollectLimits(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "big.bin", strings.Repeat("x", MaxFileBytes+1))
	write(t, dir, "small.txt", "ok")
	found, problems := Collect(dir, Seen{}, time.Now())
	if len(found) != 1 || found[0].Artifact.Data.Filename != "small.txt" {
		t.Errorf("found %+v", found)
	}
	if !strings.Contains(strings.Join(problems, "\n"), "big.bin") {
		t.Errorf("problems %v do not name the large file", problems)
	}
	found, problems = Collect(dir, Seen{Count: MaxPerRun}, time.Now())
	if len(found) != 0 || len(problems) == 0 {
		t.Errorf("a run at its limit still collected %+v (problems %v)", found, problems)
	}
	found, _ = Collect(dir, Seen{Bytes: MaxRunBytes - 1}, time.Now())
	if len(found) != 0 {
		t.Errorf("a run at its byte limit still collected %+v", found)
	}
	if found, problems := Collect(filepath.Join(dir, "none"), Seen{}, time.Now()); found != nil || problems != nil {
		t.Errorf("a missing folder: %v %v", found, problems)
	}
}

// TestCollectDoesNotHangOnAPipe: a named pipe in the folder (even as the
// manifest) is skipped, not read.
func TestCollectDoesNotHangOnAPipe(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{ManifestName, "pipe"} {
		if err := syscall.Mkfifo(filepath.Join(dir, name), 0o600); err != nil {
			t.Skip("no named pipes here:", err)
		}
	}
	write(t, dir, "ok.txt", "ok")
	done := make(chan []Found)
	go func() {
		found, _ := Collect(dir, Seen{}, time.Now())
		done <- found
	}()
	select {
	case found := <-done:
		if len(found) != 1 {
			t.Errorf("found %+v", found)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Collect hangs on a named pipe")
	}
}
