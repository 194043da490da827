package runtime

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"factory"
)

// ErrAttachmentName is the error of an attachment name a workspace cannot
// hold as given.
var ErrAttachmentName = errors.New("attachment name")

// CheckAttachmentName accepts a name that the workspace holds as given: a
// plain file name (no folder, not . or ..), without control characters
// (NUL included), at most 255 bytes, and none of the names the workspace
// itself uses (PROMPT.md, attachments/): an attachment never overwrites
// the prompt.
func CheckAttachmentName(name string) error {
	switch {
	case name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\"):
		return fmt.Errorf("%w: %q is not a plain file name", ErrAttachmentName, name)
	case len(name) > 255:
		return fmt.Errorf("%w: %q is over 255 bytes", ErrAttachmentName, name)
	case strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return fmt.Errorf("%w: %q has a control character", ErrAttachmentName, name)
	case name == "PROMPT.md" || name == "attachments":
		return fmt.Errorf("%w: %q is reserved: the workspace uses it", ErrAttachmentName, name)
	}
	return nil
}

// CheckSkillPath accepts the path of a skill's file in the workspace: clean,
// relative, inside the skills folder.
func CheckSkillPath(p string) error {
	if path.Clean(p) != p || !filepath.IsLocal(p) || !strings.HasPrefix(p, factory.SkillsDirInWorkspace+"/") {
		return fmt.Errorf("skill file %q is not inside %s", p, factory.SkillsDirInWorkspace)
	}
	return nil
}

// LayOut makes the turn's folder on this machine ready for its agent: the
// workspace with PROMPT.md, the attachments (in attachments/ and beside
// PROMPT.md) and the skills' files, the output folder and the run's own
// home. It is the one writer of a workspace, on every host, and writes only
// what is missing: the agent has had the workspace to itself since the
// last turn, so the run's folder is opened once (an os.Root: nothing the
// agent left can lead a write out of it), the workspace must be the folder
// it was, not a link, and is opened once for the whole turn (Workspace
// Root): every later read and write of the turn's in it goes through that
// root, whatever the agent makes of the path meanwhile. Nothing it made is
// overwritten. A name the workspace cannot hold as given is refused. With
// RunAs, what it makes is that user's. The caller calls Release when the
// turn is over.
func LayOut(t *Turn) error {
	t.Release()
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return err
	}
	dir, err := os.OpenRoot(t.Dir)
	if err != nil {
		return err
	}
	defer dir.Close()
	for _, d := range []string{"workspace", "output", "home", "tmp"} {
		if err := makeDir(dir, d, t.RunAs); err != nil {
			return err
		}
	}
	root, err := OpenFolder(dir, "workspace")
	if err != nil {
		return err
	}
	t.ws = root
	if err := makeDir(root, "attachments", t.RunAs); err != nil {
		return err
	}
	if err := writeMissing(root, "PROMPT.md", []byte(t.Prompt), t.RunAs); err != nil {
		return fmt.Errorf("PROMPT.md: %w", err)
	}
	for name, data := range t.Attachments {
		if err := CheckAttachmentName(name); err != nil {
			return err
		}
		if err := writeMissing(root, filepath.Join("attachments", name), data, t.RunAs); err != nil {
			return fmt.Errorf("attachment %s: %w", name, err)
		}
		// Beside PROMPT.md too (agents read event-payload.json there),
		// unless the agent has a file of that name: attachments/ holds it.
		if err := writeMissing(root, name, data, t.RunAs); err != nil {
			return fmt.Errorf("attachment %s: %w", name, err)
		}
	}
	if err := layOutHome(t); err != nil {
		return err
	}
	for p, data := range t.Files {
		if err := CheckSkillPath(p); err != nil {
			return err
		}
		if err := mkdirAll(root, path.Dir(p), t.RunAs); err != nil {
			return err
		}
		if err := writeMissing(root, p, data, t.RunAs); err != nil {
			return fmt.Errorf("skill file %s: %w", p, err)
		}
	}
	return nil
}

// makeDir makes a folder in root unless it is there (the agent's user's
// when it is new).
func makeDir(root *os.Root, name string, runAs *syscall.Credential) error {
	err := root.Mkdir(name, 0o700)
	if err == nil && runAs != nil {
		return root.Lchown(name, int(runAs.Uid), int(runAs.Gid))
	}
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	return err
}

// ErrNotAFolder refuses a folder of a run that an agent replaced with a
// link or anything else.
var ErrNotAFolder = errors.New("is not the run's folder (a link, or not a folder): refused")

// OpenFolder opens the folder name of parent as a root of its own, if it is
// a folder itself, not a link to one, and the folder opened is the one
// that was looked at (the agent did not swap it meanwhile).
func OpenFolder(parent *os.Root, name string) (*os.Root, error) {
	fi, err := parent.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s %w", name, ErrNotAFolder)
	}
	root, err := parent.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	opened, err := root.Stat(".")
	if err != nil || !os.SameFile(fi, opened) {
		root.Close()
		return nil, fmt.Errorf("%s %w", name, ErrNotAFolder)
	}
	return root, nil
}

// OpenRunFolder opens a folder of the run's folder (the workspace, the
// output, the home) as OpenFolder does.
func OpenRunFolder(runDir, name string) (*os.Root, error) {
	dir, err := os.OpenRoot(runDir)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	return OpenFolder(dir, name)
}

// WorkspaceRoot is the workspace as LayOut opened it for the turn, or, for
// a turn not laid out here, opened now as LayOut would.
func (t *Turn) WorkspaceRoot() (*os.Root, error) {
	if t.ws != nil {
		return t.ws, nil
	}
	root, err := OpenRunFolder(t.Dir, "workspace")
	if err != nil {
		return nil, err
	}
	t.ws = root
	return root, nil
}

// Release closes what LayOut opened for the turn.
func (t *Turn) Release() {
	if t.ws != nil {
		t.ws.Close()
		t.ws = nil
	}
}

// WriteRunFile writes a file of the machine's own into a run's folder
// (beside the workspace) through a root of the folder: a link there cannot
// lead the write elsewhere.
func WriteRunFile(runDir, name string, data []byte) error {
	dir, err := os.OpenRoot(runDir)
	if err != nil {
		return err
	}
	defer dir.Close()
	if fi, err := dir.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		if err := dir.Remove(name); err != nil {
			return err
		}
	}
	return dir.WriteFile(name, data, 0o600)
}

// ReadRegular reads a regular file of a root, at most limit bytes (the
// end of a longer one when tail, else an error): a named pipe, a device or
// a link that leaves the root is refused, and nothing blocks.
func ReadRegular(root *os.Root, name string, limit int64, tail bool) ([]byte, error) {
	// O_NONBLOCK: a named pipe in its place must not hang the read.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	if fi.Size() > limit {
		if !tail {
			return nil, fmt.Errorf("%s: %d bytes, over the limit of %d", name, fi.Size(), limit)
		}
		if _, err := f.Seek(fi.Size()-limit, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// writeMissing writes a file inside root unless something is there by
// that name, and gives it to the agent's user.
func writeMissing(root *os.Root, name string, data []byte, runAs *syscall.Credential) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && runAs != nil {
		err = root.Lchown(name, int(runAs.Uid), int(runAs.Gid))
	}
	return err
}

// mkdirAll makes a folder and its parents inside root, each the agent's
// user's.
func mkdirAll(root *os.Root, dir string, runAs *syscall.Credential) error {
	if err := root.MkdirAll(dir, 0o700); err != nil || runAs == nil {
		return err
	}
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		if err := root.Lchown(d, int(runAs.Uid), int(runAs.Gid)); err != nil {
			return err
		}
	}
	return nil
}

func chown(p string, runAs *syscall.Credential) error {
	if runAs == nil {
		return nil
	}
	return os.Lchown(p, int(runAs.Uid), int(runAs.Gid))
}

// layOutHome writes the turn's files of its HOME (a harness's settings),
// each replacing what is there: the run's settings are the server's to
// say, every turn.
func layOutHome(t *Turn) error {
	if len(t.HomeFiles) == 0 {
		return nil
	}
	root, err := os.OpenRoot(t.Home())
	if err != nil {
		return err
	}
	defer root.Close()
	for _, p := range slices.Sorted(maps.Keys(t.HomeFiles)) {
		if path.Clean(p) != p || !filepath.IsLocal(p) {
			return fmt.Errorf("home file %q is not a path inside the run's home", p)
		}
		if err := mkdirAll(root, path.Dir(p), t.RunAs); err != nil {
			return err
		}
		_ = root.Remove(p) // a link the agent left there is replaced, not followed
		if err := writeMissing(root, p, t.HomeFiles[p], t.RunAs); err != nil {
			return fmt.Errorf("home file %s: %w", p, err)
		}
	}
	return nil
}
