package codehost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Bounds of reading a pull (merge) request's changed files for a trigger's
// paths filter (docs/codehosts.md, Changed files).
const (
	// MaxChangedFiles is the most files read of one pull request:
	// GitHub's own cap ("Responses include a maximum of 3000 files", its
	// REST reference for GET /repos/{owner}/{repo}/pulls/{pull_number}/files).
	MaxChangedFiles = 3000
	// FilesPerPage is how many files a request asks for: the most both
	// GitHub and GitLab give in one page.
	FilesPerPage = 100
	// MaxFilesPageBytes bounds one page's answer (its diffs included,
	// which are read past, one file at a time, and not kept).
	MaxFilesPageBytes = 32 << 20
	// MaxPathBytes bounds one file's path.
	MaxPathBytes = 4096
	// FilesTimeout bounds the reading of one pull request's files, every
	// page and the token they need included.
	FilesTimeout = 20 * time.Second
	// FilesHoldOff is how long a host that let a read run out of time is
	// not asked again: reads of it fail at once, with the same reason, so
	// that one host's outage does not hold every delivery's evaluation
	// for FilesTimeout.
	FilesHoldOff = time.Minute
)

// FileLister is a host that lists the files a pull (merge) request
// changes.
type FileLister interface {
	// ChangedFiles lists the paths the pull (merge) request number of r
	// changes (a renamed file's old path too), each once, reading at most
	// max of the host's file entries; capped says there may be more than
	// it read (it stopped at max, or at the host's own cap).
	ChangedFiles(ctx context.Context, r Repo, number, max int) (paths []string, capped bool, err error)
}

// ChangedFiles lists the files a pull (merge) request of a factory's
// repository changes, through the factory's host (For): ErrNoHost where
// this server has no credential for it.
func (h *Hosts) ChangedFiles(ctx context.Context, factoryName string, r Repo, number int) ([]string, bool, error) {
	host, err := h.For(factoryName, r.Host)
	if err != nil {
		return nil, false, err
	}
	l, ok := host.(FileLister)
	if !ok {
		return nil, false, fmt.Errorf("the %s host of this server does not list a pull request's files", r.Host)
	}
	return l.ChangedFiles(ctx, r, number, MaxChangedFiles)
}

// FileReader reads pull requests' changed files for the paths filter:
// within FilesTimeout, and not from a host that let a read run out of
// time in the last FilesHoldOff.
type FileReader struct {
	Hosts *Hosts
	// Timeout and HoldOff: zero takes FilesTimeout and FilesHoldOff.
	Timeout, HoldOff time.Duration
	Now              func() time.Time

	mu   sync.Mutex
	held map[string]heldHost // by factory and host
}

type heldHost struct {
	until time.Time
	err   error
}

// Read lists the files of a factory's pull (merge) request (Hosts.ChangedFiles).
func (fr *FileReader) Read(ctx context.Context, factoryName string, r Repo, number int) ([]string, bool, error) {
	key := factoryName + "\x00" + r.Host
	now := fr.now()
	fr.mu.Lock()
	h, held := fr.held[key]
	fr.mu.Unlock()
	if held && now.Before(h.until) {
		return nil, false, fmt.Errorf("%w (not asked again until %s)", h.err, h.until.UTC().Format(time.RFC3339))
	}
	timeout := cmpOr(fr.Timeout, FilesTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	paths, capped, err := fr.Hosts.ChangedFiles(ctx, factoryName, r, number)
	if err != nil && ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("%s did not list the files of %s in %s: %w", r.Host, r.Path, timeout, err)
		fr.mu.Lock()
		if fr.held == nil {
			fr.held = map[string]heldHost{}
		}
		fr.held[key] = heldHost{until: now.Add(cmpOr(fr.HoldOff, FilesHoldOff)), err: err}
		fr.mu.Unlock()
	}
	return paths, capped, err
}

func (fr *FileReader) now() time.Time {
	if fr.Now != nil {
		return fr.Now()
	}
	return time.Now()
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// FileList gathers the paths of a pull request's changed files from the
// pages its host answers with (GitHub's diff entries, GitLab's diffs),
// each path once, at most Max entries in all.
type FileList struct {
	Max int
	// PageBytes bounds a page; 0 is MaxFilesPageBytes.
	PageBytes int64
	Entries   int // entries read so far, over every page
	Paths     []string
	seen      map[string]bool
}

// Full reports whether the list has read Max entries.
func (l *FileList) Full() bool { return l.Entries >= l.Max }

// ErrPageTooLarge is the error of a page over its bound (PageBytes).
var ErrPageTooLarge = errors.New("a page of the pull request's files is over the size this server reads")

// ReadPage reads one page, a JSON array of objects, from r (at most
// PageBytes of it), one entry at a time: each entry's string
// under each of keys is a path (a key that is absent or null names
// none; one entry must name at least one). It stops at Max entries, and
// returns how many entries the page had that it read.
func (l *FileList) ReadPage(r io.Reader, keys ...string) (int, error) {
	limit := l.PageBytes
	if limit <= 0 {
		limit = MaxFilesPageBytes
	}
	dec := json.NewDecoder(&pageLimit{r: r, left: limit})
	if err := expectDelim(dec, '['); err != nil {
		return 0, err
	}
	n := 0
	for dec.More() {
		if l.Full() {
			return n, nil
		}
		var entry map[string]json.RawMessage
		if err := dec.Decode(&entry); err != nil {
			return n, fmt.Errorf("file %d of the page: %w", n+1, unwrapLimit(err))
		}
		if entry == nil {
			return n, fmt.Errorf("file %d of the page: not an object", n+1)
		}
		if err := l.add(entry, keys); err != nil {
			return n, fmt.Errorf("file %d of the page: %w", n+1, err)
		}
		n++
	}
	return n, expectDelim(dec, ']')
}

// add takes an entry's paths: all of them, or none when one is not a
// path (a page that fails leaves no part of its bad entry behind).
func (l *FileList) add(entry map[string]json.RawMessage, keys []string) error {
	var paths []string
	for _, k := range keys {
		raw, ok := entry[k]
		if !ok || string(raw) == "null" {
			continue
		}
		var p string
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("%s is not a string", k)
		}
		if err := checkPath(p); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return fmt.Errorf("names no path (%s)", strings.Join(keys, ", "))
	}
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	for _, p := range paths {
		if !l.seen[p] {
			l.seen[p] = true
			l.Paths = append(l.Paths, p)
		}
	}
	l.Entries++
	return nil
}

// checkPath refuses what no repository's file path is: an empty one, one
// over MaxPathBytes, invalid UTF-8, a NUL.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("an empty path")
	case len(p) > MaxPathBytes:
		return fmt.Errorf("a path over %d bytes", MaxPathBytes)
	case !utf8.ValidString(p):
		return errors.New("a path that is not UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("a path with a NUL byte")
	}
	return nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("the page's files: %w", unwrapLimit(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("the page's files: %v where %q belongs", tok, string(want))
	}
	return nil
}

// pageLimit reads at most left bytes, then fails with ErrPageTooLarge.
type pageLimit struct {
	r    io.Reader
	left int64
}

func (p *pageLimit) Read(b []byte) (int, error) {
	if p.left <= 0 {
		// One byte more tells a page that ends exactly at the limit from
		// one that goes on.
		var one [1]byte
		if n, _ := p.r.Read(one[:]); n > 0 {
			return 0, ErrPageTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(b)) > p.left {
		b = b[:p.left]
	}
	n, err := p.r.Read(b)
	p.left -= int64(n)
	return n, err
}

// unwrapLimit keeps ErrPageTooLarge recognisable through the decoder.
func unwrapLimit(err error) error {
	if errors.Is(err, ErrPageTooLarge) {
		return ErrPageTooLarge
	}
	return err
}
