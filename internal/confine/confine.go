// Package confine keeps an agent's processes to what its run needs on this
// machine, through Landlock, the kernel's access control that any process
// may apply to itself (through go-landlock; this is its only importer). A
// confined agent writes its run's own folders only (its workspace, output,
// home and temporary folder), reads and runs the machine's programs and
// libraries (the system folders, the harness's programs), and reaches
// nothing else of the filesystem: not the server's data directory (its keys,
// its store, other runs' workspaces), not any user's home, not the
// credentials a process was started with; nor can it signal, trace or read
// the memory and environment of any process outside its own (other runs'
// agents, the server). The network is not restricted.
//
// Landlock restricts the thread that asks, and what that thread then
// starts: the agent is started from a thread of its own that is restricted
// first and never runs anything else (Restrict's contract).
package confine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// Policy is what one agent may reach.
type Policy struct {
	// ReadWrite are the folders it writes (its run's own).
	ReadWrite []string
	// ReadOnly are what it reads and runs besides the system folders: its
	// harness's programs (a folder, or a file), never inside a hidden one.
	ReadOnly []string
	// Granted are what it reads as the operator or the server said, even
	// inside a hidden folder: an environment's readOnly, the harnesses the
	// server installed in its data directory.
	Granted []string
	// Hidden are never reached, even below a folder it reads: the data
	// directory, credentials files. Only a ReadWrite folder inside one is
	// reached (the run's folders are in the data directory).
	Hidden []string
}

// SystemRead are the folders every agent reads and runs programs from (those
// that exist): the programs, libraries and configuration of the machine,
// /proc and /sys (Landlock keeps other processes' environments and memory
// out of reach whatever their files' modes), and where a resolver's
// configuration may live.
var SystemRead = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/snap",
	"/proc", "/sys", "/run/systemd/resolve", "/run/resolvconf"}

// Devices are the device files every agent reads and writes.
var Devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// ErrUnsupported says this kernel has no Landlock.
var ErrUnsupported = errors.New("this kernel has no Landlock")

// config restricts every filesystem access right this library knows and the
// IPC scopes (signals, abstract UNIX sockets), never the network; best
// effort: an older kernel enforces what it has.
var config = landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}.BestEffort()

// The main goroutine keeps the process's main thread for itself, so that
// no other goroutine ever runs there: an agent's restriction must never
// land on the thread whose ID is the process's (/proc/<pid> is that
// thread's, and an agent in its domain would read the server's environment
// and memory there). Restrict refuses that thread besides.
func init() { runtime.LockOSThread() }

// ABI is the Landlock ABI version of this kernel; 0 when it has none (or
// it is disabled).
func ABI() int {
	v, err := llsyscall.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Describe says how agents are confined on this machine, for a log line and
// status: "Landlock ABI N", or why not.
func Describe() (string, bool) {
	if v := ABI(); v > 0 {
		return fmt.Sprintf("Landlock (ABI %d)", v), true
	}
	return "none: this kernel has no Landlock (Linux 5.13 or later, with landlock among its LSMs)", false
}

// HideProcess makes this process's memory and environment out of reach of
// the processes of its user that are not root (/proc/<pid>/environ, mem,
// ptrace): the server's own secrets, for its agents on any kernel. A
// process that cannot be dumped leaves no core file either.
func HideProcess() {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// Restrict confines the calling thread, and everything it starts from now
// on, to the policy. The caller holds runtime.LockOSThread and never
// unlocks it (the thread then ends with its goroutine, and runs nothing
// else of this process's): the restriction is this thread's alone.
func (p Policy) Restrict() error {
	if unix.Gettid() == unix.Getpid() {
		return errors.New("refusing to confine the process's main thread")
	}
	rules, err := p.rules()
	if err != nil {
		return err
	}
	fd, flags, err := config.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("the agent's Landlock ruleset: %w", err)
	}
	if fd < 0 {
		return ErrUnsupported
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := llsyscall.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}

// rules are the policy as Landlock rules: each path granted, a file as a
// file, a folder below which a hidden path lies as its other entries.
func (p Policy) rules() ([]landlock.Rule, error) {
	hidden := resolveAll(p.Hidden)
	var rules []landlock.Rule
	for _, g := range grants(SystemRead, hidden, true) {
		rules = append(rules, readRule(g))
	}
	for _, g := range grants(p.ReadOnly, hidden, true) {
		rules = append(rules, readRule(g))
	}
	for _, g := range grants(p.Granted, hidden, false) {
		rules = append(rules, readRule(g))
	}
	for _, d := range p.ReadWrite {
		if _, err := os.Stat(d); err != nil {
			return nil, fmt.Errorf("the agent's folder %s: %w", d, err)
		}
		rules = append(rules, landlock.RWDirs(d).WithRefer().WithResolveUnix())
	}
	for _, d := range Devices {
		if fi, err := os.Stat(d); err == nil {
			if fi.IsDir() {
				rules = append(rules, landlock.RWDirs(d).WithIoctlDev())
			} else {
				rules = append(rules, landlock.RWFiles(d).WithIoctlDev())
			}
		}
	}
	return rules, nil
}

// grant is a path granted read access, and whether it is a folder.
type grant struct {
	path string
	dir  bool
}

func readRule(g grant) landlock.Rule {
	if g.dir {
		return landlock.RODirs(g.path)
	}
	return landlock.ROFiles(g.path)
}

// grants are the paths to grant for roots (those that exist, resolved):
// a root with a hidden path below it is replaced by its entries, but for
// the one that leads to the hidden path, which is looked into the same way.
// A root inside a hidden path is left out when system (a system folder in
// the data directory is not the agent's), kept otherwise (a run's folder).
func grants(roots []string, hidden []string, system bool) []grant {
	var out []grant
	for _, root := range roots {
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		fi, err := os.Stat(real)
		if err != nil {
			continue
		}
		if system && slices.ContainsFunc(hidden, func(h string) bool { return within(real, h) }) {
			continue
		}
		below := slices.DeleteFunc(slices.Clone(hidden), func(h string) bool { return !within(h, real) || h == real })
		if len(below) == 0 || !fi.IsDir() {
			out = append(out, grant{path: real, dir: fi.IsDir()})
			continue
		}
		entries, err := os.ReadDir(real)
		if err != nil {
			continue
		}
		var children []string
		for _, e := range entries {
			child := filepath.Join(real, e.Name())
			if !slices.Contains(below, child) {
				children = append(children, child)
			}
		}
		// A child that resolves into a hidden path (a link to it) is left
		// out: its rule would be the hidden path's.
		out = append(out, grants(children, hidden, true)...)
	}
	return out
}

// within says whether p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// resolveAll is paths absolute and resolved (a path that does not exist is
// kept as it is written: nothing can be granted inside it anyway).
func resolveAll(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		out = append(out, abs)
	}
	return out
}
