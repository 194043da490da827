package runtime

import (
	"errors"
	"fmt"
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
// PROMPT.md) and the skills' files, and the output folder. It is the one
// writer of a workspace, on every host, and writes only what is missing:
// the agent has had the workspace to itself since the last turn, so every
// path is resolved inside it (a link it left cannot lead a write
// elsewhere) and nothing it made is overwritten. A name the workspace
// cannot hold as given is refused. With RunAs, what it makes is that
// user's.
func LayOut(t *Turn) error {
	if err := os.MkdirAll(t.Dir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{t.Workspace(), t.AttachmentsDir(), t.OutputDir(), t.HomeDir()} {
		if err := os.Mkdir(d, 0o700); err == nil {
			if err := chown(d, t.RunAs); err != nil {
				return err
			}
		} else if !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	root, err := os.OpenRoot(t.Workspace())
	if err != nil {
		return err
	}
	defer root.Close()
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
	if len(t.Home) == 0 {
		return nil
	}
	root, err := os.OpenRoot(t.HomeDir())
	if err != nil {
		return err
	}
	defer root.Close()
	for _, p := range slices.Sorted(maps.Keys(t.Home)) {
		if path.Clean(p) != p || !filepath.IsLocal(p) {
			return fmt.Errorf("home file %q is not a path inside the run's home", p)
		}
		if err := mkdirAll(root, path.Dir(p), t.RunAs); err != nil {
			return err
		}
		_ = root.Remove(p) // a link the agent left there is replaced, not followed
		if err := writeMissing(root, p, t.Home[p], t.RunAs); err != nil {
			return fmt.Errorf("home file %s: %w", p, err)
		}
	}
	return nil
}
