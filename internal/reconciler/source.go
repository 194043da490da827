// Package reconciler turns a factory repository into applied state, as a
// pipeline of named steps: fetch (a Source produces a Snapshot), load (parse
// and validate every file), plan (compare with the state), apply (one
// durable batch). `factory reconcile --dry-run` and the server run the same
// steps and stop at different points.
package reconciler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"

	"factory"
	"factory/internal/schema"
)

// Snapshot is one revision of a factory repository: the files that matter
// (factory.yaml and everything in the known folders), by slash-separated
// path, the other top-level folders (the loader judges them), and the
// problems the source found while reading.
type Snapshot struct {
	Revision    string
	Files       map[string][]byte
	OtherDirs   []string
	Diagnostics schema.Diagnostics
}

// Budget counts what the readers of one revision have taken, and refuses a
// file that would take the revision over MaxRevisionFiles or
// MaxRevisionBytes, before it is read. Once refused, every later file is
// too; the first refusal is the one reported.
type Budget struct {
	mu       sync.Mutex
	files    int
	bytes    int64
	exceeded bool
}

// Take books one file of size bytes. It returns the error to report (the
// first time the budget is exceeded), and whether the file may be read.
func (b *Budget) Take(size int64) (report error, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exceeded {
		return nil, false
	}
	switch {
	case b.files+1 > factory.MaxRevisionFiles:
		report = fmt.Errorf("the revision holds more than %d definition files, the limit", factory.MaxRevisionFiles)
	case b.bytes+size > factory.MaxRevisionBytes:
		report = fmt.Errorf("the revision's definition files are over %d MiB in all, the limit", factory.MaxRevisionBytes>>20)
	}
	if report != nil {
		b.exceeded = true
		return report, false
	}
	b.files++
	b.bytes += size
	return nil, true
}

// Source fetches the current revision of a factory repository.
type Source interface {
	// Fetch reads the repository. An error means the source could not be
	// read at all (missing directory, network); problems with single files
	// are Snapshot.Diagnostics.
	Fetch(ctx context.Context) (*Snapshot, error)
	// String names the source for status output: a path or a URL.
	String() string
}

// DirSource reads a factory from a local directory.
type DirSource struct{ Root string }

func (d DirSource) String() string {
	if abs, err := filepath.Abs(d.Root); err == nil {
		return abs
	}
	return d.Root
}

// Fetch reads factory.yaml and every file in the known folders (see
// factory.KnownDirs), to any depth up to factory.MaxTreeDepth. Other files
// at the root are ignored, as in a git repository with other content; other
// top-level folders are listed for the loader. A symlink is followed only
// while it stays inside the directory.
func (d DirSource) Fetch(ctx context.Context) (*Snapshot, error) {
	root, err := filepath.Abs(d.Root)
	if err != nil {
		return nil, err
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, fmt.Errorf("read factory source %s: %w", d.Root, err)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("read factory source %s: not a directory", d.Root)
	}
	snap := &Snapshot{Files: map[string][]byte{}}
	r := dirReader{root: root, snap: snap, budget: &Budget{}}
	r.file(factory.SettingsFile, true)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read factory source %s: %w", d.Root, err)
	}
	var names []string
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		switch n := e.Name(); {
		case strings.HasPrefix(n, "."):
		case factory.IsKnownDir(n):
			names = r.list(n, 1, names)
		case e.IsDir():
			snap.OtherDirs = append(snap.OtherDirs, n)
		}
	}
	r.readAll(names)
	snap.Revision = "sha256:" + contentDigest(snap.Files)[:12]
	return snap, nil
}

type dirReader struct {
	root   string
	snap   *Snapshot
	budget *Budget // shared by the readers of one revision
}

func (r *dirReader) problem(rel, msg string) {
	r.snap.Diagnostics = append(r.snap.Diagnostics, schema.Diagnostic{File: rel, Message: msg, Severity: schema.Error})
}

// inside resolves a path and reports whether it stays within the root.
func (r *dirReader) inside(rel string) (string, bool) {
	real, err := filepath.EvalSymlinks(filepath.Join(r.root, filepath.FromSlash(rel)))
	if err != nil {
		return "", false
	}
	return real, real == r.root || strings.HasPrefix(real, r.root+string(filepath.Separator))
}

// list appends the files under rel, a folder depth levels below the root,
// to names; reading them is readAll's.
func (r *dirReader) list(rel string, depth int, names []string) []string {
	full := filepath.Join(r.root, filepath.FromSlash(rel))
	fi, err := os.Lstat(full)
	if err != nil {
		r.problem(rel, err.Error())
		return names
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		real, ok := r.inside(rel)
		if !ok {
			r.problem(rel, "symlink leads outside the repository")
			return names
		}
		if fi, err = os.Stat(real); err != nil {
			r.problem(rel, err.Error())
			return names
		}
	}
	if !fi.IsDir() {
		return append(names, rel)
	}
	if depth > factory.MaxTreeDepth {
		r.problem(rel, fmt.Sprintf("folders nest deeper than %d levels here; nothing below is read", factory.MaxTreeDepth))
		return names
	}
	entries, err := os.ReadDir(full)
	if err != nil {
		r.problem(rel, fmt.Sprintf("cannot read directory: %v", err))
		return names
	}
	for _, e := range entries {
		switch child := rel + "/" + e.Name(); {
		case strings.HasPrefix(e.Name(), "."): // .gitkeep and editors' swap files
		case e.Type().IsRegular():
			names = append(names, child) // file() checks it again when it reads it
		default:
			names = r.list(child, depth+1, names) // folders, links and the odd ones
		}
	}
	return names
}

// readAll reads the listed files. A factory can hold a thousand files:
// read them on every core, each into its own reader, and merge in order.
func (r *dirReader) readAll(names []string) {
	workers := min(2*runtime.GOMAXPROCS(0), len(names))
	parts := make([]dirReader, len(names))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				parts[i] = dirReader{root: r.root, snap: &Snapshot{Files: map[string][]byte{}}, budget: r.budget}
				parts[i].file(names[i], false)
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, p := range parts {
		for name, b := range p.snap.Files {
			r.snap.Files[name] = b
		}
		r.snap.Diagnostics = append(r.snap.Diagnostics, p.snap.Diagnostics...)
	}
}

// file reads one definition file, refusing what a repository should not
// hold: links out of it, non-regular files, files over the size limit.
func (r *dirReader) file(rel string, optional bool) {
	full := filepath.Join(r.root, filepath.FromSlash(rel))
	fi, err := os.Lstat(full)
	if os.IsNotExist(err) && optional {
		return
	}
	if err != nil {
		r.problem(rel, err.Error())
		return
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		real, ok := r.inside(rel)
		if !ok {
			r.problem(rel, "symlink leads outside the repository")
			return
		}
		if fi, err = os.Stat(real); err != nil {
			r.problem(rel, err.Error())
			return
		}
		full = real
	}
	if fi.IsDir() {
		r.problem(rel, "factory.yaml must be a file")
		return
	}
	if !fi.Mode().IsRegular() {
		r.problem(rel, "not a regular file")
		return
	}
	if fi.Size() > factory.MaxDefinitionFileBytes {
		r.problem(rel, fmt.Sprintf("file is %d bytes; the limit is 1 MiB", fi.Size()))
		return
	}
	if report, ok := r.budget.Take(fi.Size()); !ok {
		if report != nil {
			r.problem(rel, report.Error())
		}
		return
	}
	f, err := os.Open(full)
	if err != nil {
		r.problem(rel, err.Error())
		return
	}
	defer f.Close()
	// The size was checked, but the file may grow between stat and read.
	b, err := io.ReadAll(io.LimitReader(f, factory.MaxDefinitionFileBytes+1))
	if err != nil {
		r.problem(rel, err.Error())
		return
	}
	if len(b) > factory.MaxDefinitionFileBytes {
		r.problem(rel, "file is over the 1 MiB limit")
		return
	}
	r.snap.Files[rel] = b
}

// contentDigest identifies a directory revision by its content, so that
// an unchanged directory has an unchanged revision.
func contentDigest(files map[string][]byte) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(files[p]))
		h.Write(files[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}
