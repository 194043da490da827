package codehost_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"factory/internal/codehost"
)

// TestReadPage: a host's page of changed files, read one entry at a time:
// each path once (a renamed file's both), what no page of files is
// refused with the entry it is at, and a page over the size bound refused
// without being held.
func TestReadPage(t *testing.T) {
	gh := []string{"filename", "previous_filename"}
	for _, c := range []struct {
		name, page string
		max        int
		want       []string
		entries    int
		err        string
	}{
		{"GitHub's entries", `[{"sha":null,"filename":"a.go","status":"modified","patch":"@@ -1 +1 @@"},` +
			`{"filename":"b/c.md","status":"renamed","previous_filename":"b/old.md"}]`, 10, []string{"a.go", "b/c.md", "b/old.md"}, 2, ""},
		{"no files", ` [ ] `, 10, nil, 0, ""},
		{"a path twice", `[{"filename":"a"},{"filename":"b","previous_filename":"a"}]`, 10, []string{"a", "b"}, 2, ""},
		{"a null previous name", `[{"filename":"a","previous_filename":null}]`, 10, []string{"a"}, 1, ""},
		{"stops at the bound", `[{"filename":"a"},{"filename":"b"},{"filename":"c"}]`, 2, []string{"a", "b"}, 2, ""},
		{"an error's answer", `{"message":"Not Found"}`, 10, nil, 0, `the page's files: { where "[" belongs`},
		{"not JSON", `<html>`, 10, nil, 0, "the page's files: invalid character '<'"},
		{"an entry that is a string", `["a.go"]`, 10, nil, 0, "file 1 of the page: json: cannot unmarshal string"},
		{"a null entry", `[{"filename":"a"},null]`, 10, []string{"a"}, 1, "file 2 of the page: not an object"},
		{"a number for a path", `[{"filename":7}]`, 10, nil, 0, "file 1 of the page: filename is not a string"},
		{"no path", `[{"status":"added"}]`, 10, nil, 0, "file 1 of the page: names no path (filename, previous_filename)"},
		{"an empty path", `[{"filename":""}]`, 10, nil, 0, "file 1 of the page: filename: an empty path"},
		{"a NUL", `[{"filename":"a\u0000b"}]`, 10, nil, 0, "filename: a path with a NUL byte"},
		{"a path too long", `[{"filename":"` + strings.Repeat("x", codehost.MaxPathBytes+1) + `"}]`, 10, nil, 0, "filename: a path over 4096 bytes"},
		{"cut short", `[{"filename":"a"},{"filena`, 10, []string{"a"}, 1, "file 2 of the page: unexpected EOF"},
		{"no end", `[{"filename":"a"}`, 10, []string{"a"}, 1, "the page's files: EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &codehost.FileList{Max: c.max}
			n, err := l.ReadPage(strings.NewReader(c.page), gh...)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
			if !slices.Equal(l.Paths, c.want) || l.Entries != c.entries || c.err == "" && n != c.entries {
				t.Errorf("paths %q, %d entries (%d on the page); want %q, %d", l.Paths, l.Entries, n, c.want, c.entries)
			}
		})
	}
}

// TestReadPageTooLarge: a page over its bound (one file's patch that does
// not end) is refused once the bound is read.
func TestReadPageTooLarge(t *testing.T) {
	r := io.MultiReader(strings.NewReader(`[{"filename":"a","patch":"`), &endless{}, strings.NewReader(`"}]`))
	l := &codehost.FileList{Max: 10, PageBytes: 1 << 20}
	if _, err := l.ReadPage(r, "filename"); !errors.Is(err, codehost.ErrPageTooLarge) {
		t.Fatalf("%v", err)
	}
	// A page of exactly the bound is read.
	head, tail := `[{"filename":"a","patch":"`, `"}]`
	fill := 1<<20 - len(head) - len(tail)
	r = io.MultiReader(strings.NewReader(head), io.LimitReader(&endless{}, int64(fill)), strings.NewReader(tail))
	if _, err := l.ReadPage(r, "filename"); err != nil || !slices.Equal(l.Paths, []string{"a"}) {
		t.Fatalf("a page of exactly the bound: %v %q", err, l.Paths)
	}
}

// endless reads as x without end.
type endless struct{}

func (*endless) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 'x'
	}
	return len(b), nil
}

// FuzzReadPage: whatever a host answers, a page is read without a panic,
// within its bounds, and every path kept is one a repository could have,
// kept once.
func FuzzReadPage(f *testing.F) {
	for _, s := range []string{`[]`, `[{"filename":"a.go","previous_filename":"b.go"}]`, `[{"new_path":"x","old_path":"x"}]`,
		`[{"filename":"a"},null]`, `{"message":"x"}`, `[{"filename":"a\u0000"}]`, `[[` + "\xff" + `]]`} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, page []byte, max uint8) {
		l := &codehost.FileList{Max: int(max)}
		n, _ := l.ReadPage(strings.NewReader(string(page)), "filename", "previous_filename", "new_path", "old_path")
		if l.Entries > int(max) || n > l.Entries || len(l.Paths) > 4*l.Entries {
			t.Fatalf("%d entries (%d on the page), %d paths, at most %d", l.Entries, n, len(l.Paths), max)
		}
		seen := map[string]bool{}
		for _, p := range l.Paths {
			if p == "" || len(p) > codehost.MaxPathBytes || strings.ContainsRune(p, 0) || !utf8.ValidString(p) || seen[p] {
				t.Fatalf("path %q", p)
			}
			seen[p] = true
		}
	})
}

// lister is a code host that lists pull requests' files through list.
type lister struct {
	codehost.Host
	name  string
	calls atomic.Int32
	list  func(ctx context.Context) ([]string, bool, error)
}

func (l *lister) Name() string { return l.name }

func (l *lister) ChangedFiles(ctx context.Context, r codehost.Repo, number, max int) ([]string, bool, error) {
	l.calls.Add(1)
	return l.list(ctx)
}

// TestFileReader: a host that lets a read run out of time is not asked
// again for a while, each read failing at once with the same reason; a
// factory whose host has no credential, or a host that lists no files,
// get errors that say so.
func TestFileReader(t *testing.T) {
	slow := &lister{name: codehost.GitHub, list: func(ctx context.Context) ([]string, bool, error) {
		<-ctx.Done()
		return nil, false, ctx.Err()
	}}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	fr := &codehost.FileReader{Hosts: &codehost.Hosts{GitHub: slow}, Timeout: 20 * time.Millisecond, HoldOff: time.Minute,
		Now: func() time.Time { return now }}
	pr := codehost.Repo{Host: codehost.GitHub, Path: "acme/widgets"}
	_, _, err := fr.Read(context.Background(), "acme", pr, 3)
	if err == nil || !strings.Contains(err.Error(), "github did not list the files of acme/widgets in 20ms") || slow.calls.Load() != 1 {
		t.Fatalf("the first read: %v (%d calls)", err, slow.calls.Load())
	}
	_, _, again := fr.Read(context.Background(), "acme", pr, 4)
	if again == nil || !strings.Contains(again.Error(), err.Error()) || !strings.Contains(again.Error(), "not asked again until 2026-05-01T12:01:00Z") ||
		slow.calls.Load() != 1 {
		t.Fatalf("a read while held off: %v (%d calls)", again, slow.calls.Load())
	}
	now = now.Add(2 * time.Minute)
	slow.list = func(context.Context) ([]string, bool, error) { return []string{"a.go"}, false, nil }
	if paths, _, err := fr.Read(context.Background(), "acme", pr, 4); err != nil || !slices.Equal(paths, []string{"a.go"}) || slow.calls.Load() != 2 {
		t.Fatalf("after the hold-off: %q %v", paths, err)
	}

	gl := codehost.Repo{Host: codehost.GitLab, Path: "acme/widgets"}
	if _, _, err := fr.Read(context.Background(), "acme", gl, 1); !errors.Is(err, codehost.ErrNoHost) {
		t.Errorf("no GitLab: %v", err)
	}
	plain := &codehost.FileReader{Hosts: &codehost.Hosts{GitLab: struct{ codehost.Host }{}}}
	if _, _, err := plain.Read(context.Background(), "acme", gl, 1); err == nil || err.Error() != "the gitlab host of this server does not list a pull request's files" {
		t.Errorf("a host that lists no files: %v", err)
	}
}
