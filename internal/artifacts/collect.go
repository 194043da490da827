package artifacts

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"factory"
)

// Found is an artifact collected from an output folder, with its bytes
// when it has any.
type Found struct {
	Artifact factory.Artifact
	Bytes    []byte
	// Key names what the artifact is (a file's path, a link's URL) and
	// Digest its content, so that a later turn does not report it again.
	Key, Digest string
}

// Seen is what a run reported before: key → digest, and the counts the
// limits apply to.
type Seen struct {
	Digests map[string]string
	Count   int
	Bytes   int64
}

// Collect reads an output folder: a FILE for every regular file in it
// (symbolic links and other special files are skipped, never followed),
// turned into a SCREENSHOT or a PLAN or given a description by the
// manifest's lines, and the manifest's links. What Seen holds with the
// same content is not reported again; what would pass the limits is
// skipped and said in problems. A folder that does not exist holds
// nothing.
func Collect(dir string, seen Seen, now time.Time) (found []Found, problems []string) {
	root, err := openFolder(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []string{"reading the output folder: " + err.Error()}
	}
	defer root.Close()
	c := &collector{root: root, seen: seen, now: now, decl: map[string]Declaration{}}
	var links []Declaration
	if data, err := readFile(root, ManifestName, MaxManifestBytes); err == nil {
		decls, errs := ParseManifest(data)
		for _, e := range errs {
			problems = append(problems, e.Error())
		}
		for _, d := range decls {
			if d.File != "" {
				c.decl[d.File] = d
			} else {
				links = append(links, d)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		problems = append(problems, ManifestName+": "+err.Error())
	}
	c.walk()
	for _, d := range links {
		c.link(d)
	}
	for p := range c.decl {
		if !c.used[p] {
			c.problems = append(c.problems, fmt.Sprintf("%s names %s, which is not a regular file in the output folder", ManifestName, p))
		}
	}
	return c.found, append(problems, c.problems...)
}

// openFolder opens the output folder as a root if it is a folder, not a
// link the agent put in its place, and the one looked at.
func openFolder(dir string) (*os.Root, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a folder (a link?): refused", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	if opened, err := root.Stat("."); err != nil || !os.SameFile(fi, opened) {
		root.Close()
		return nil, fmt.Errorf("%s changed while it was opened: refused", dir)
	}
	return root, nil
}

type collector struct {
	root     *os.Root
	seen     Seen
	now      time.Time
	decl     map[string]Declaration
	used     map[string]bool
	found    []Found
	problems []string
}

// walk reports the folder's regular files, in path order.
func (c *collector) walk() {
	c.used = map[string]bool{}
	err := fs.WalkDir(c.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			c.problems = append(c.problems, err.Error())
			return nil
		}
		if d.IsDir() || p == ManifestName {
			return nil
		}
		if !d.Type().IsRegular() {
			c.problems = append(c.problems, p+": not a regular file; skipped")
			return nil
		}
		c.used[p] = true
		c.file(p)
		return nil
	})
	if err != nil {
		c.problems = append(c.problems, err.Error())
	}
}

// file reports one file, unless it was reported before as it is.
func (c *collector) file(p string) {
	data, err := readFile(c.root, p, MaxFileBytes)
	if err != nil {
		c.problems = append(c.problems, p+": "+err.Error())
		return
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	key := "file:" + p
	if c.seen.Digests[key] == digest {
		return
	}
	if !c.admit(p, int64(len(data))) {
		return
	}
	d := c.decl[p]
	a := factory.Artifact{Type: factory.ArtifactFile, CreatedAt: c.now, Data: factory.ArtifactData{UID: factory.NewUUID(),
		Filename: path.Base(p), Filepath: p, MimeType: mimeType(p, data), SizeBytes: int64(len(data)),
		Description: d.Description, Title: d.Title}}
	switch d.Type {
	case factory.ArtifactScreenshot:
		a.Type = factory.ArtifactScreenshot
	case factory.ArtifactPlan:
		a.Type = factory.ArtifactPlan
		a.Data.DocumentUID = a.Data.UID
	}
	c.found = append(c.found, Found{Artifact: a, Bytes: data, Key: key, Digest: digest})
}

// link reports a pull request or an external reference, unless it was
// reported before.
func (c *collector) link(d Declaration) {
	key := string(d.Type) + ":" + d.URL
	if _, ok := c.seen.Digests[key]; ok {
		return
	}
	for _, f := range c.found {
		if f.Key == key {
			return
		}
	}
	if !c.admit(d.URL, 0) {
		return
	}
	a := factory.Artifact{Type: d.Type, CreatedAt: c.now, Data: factory.ArtifactData{URL: d.URL, Branch: d.Branch,
		Title: d.Title, ReferenceType: d.ReferenceType, Metadata: d.Metadata}}
	if a.Type == factory.ArtifactExternalReference && a.Data.ReferenceType == "" {
		a.Data.ReferenceType = "link"
	}
	c.found = append(c.found, Found{Artifact: a, Key: key})
}

// admit counts an artifact against the run's limits.
func (c *collector) admit(name string, size int64) bool {
	if c.seen.Count+len(c.found) >= MaxPerRun {
		c.problems = append(c.problems, fmt.Sprintf("%s: the run has reported %d artifacts, the most it may; skipped", name, MaxPerRun))
		return false
	}
	var total int64
	for _, f := range c.found {
		total += int64(len(f.Bytes))
	}
	if c.seen.Bytes+total+size > MaxRunBytes {
		c.problems = append(c.problems, fmt.Sprintf("%s: the run's artifacts would pass %d MiB; skipped", name, MaxRunBytes>>20))
		return false
	}
	return true
}

// readFile reads a regular file of the root within a limit, checking the
// size before reading and while reading (the file may grow).
func readFile(root *os.Root, name string, limit int64) ([]byte, error) {
	// O_NONBLOCK: a regular file swapped for a named pipe since the walk
	// must not hang the read (it is then refused as not regular).
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if info.Size() > limit {
		return nil, fmt.Errorf("%d bytes, over the limit of %d; skipped", info.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		return nil, fmt.Errorf("over the limit of %d bytes; skipped", limit)
	}
	return data, err
}

// textTypes are the types of what agents write most, whatever the
// machine's MIME table says (Go's own has none of them).
var textTypes = map[string]string{".md": "text/markdown; charset=utf-8", ".txt": "text/plain; charset=utf-8",
	".log": "text/plain; charset=utf-8", ".diff": "text/x-diff; charset=utf-8", ".patch": "text/x-diff; charset=utf-8",
	".yaml": "application/yaml", ".yml": "application/yaml"}

// mimeType is a file's type by its extension, else by its first bytes.
func mimeType(p string, data []byte) string {
	if t, ok := textTypes[strings.ToLower(path.Ext(p))]; ok {
		return t
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return http.DetectContentType(data)
}
