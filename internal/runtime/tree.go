package runtime

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// How a turn's agent is ended (docs/spec/harnesses.md, "Ending a turn").
const (
	// ExitGrace is how long an agent whose stdin was closed has to exit
	// by itself; Gemini CLI keeps its session for a later session/load
	// only when it does.
	ExitGrace = 5 * time.Second
	// KillGrace is how long the processes left of a turn have between
	// SIGTERM and SIGKILL.
	KillGrace = 5 * time.Second
)

// RunMarker is the environment entry every process of a run's turn
// carries (FACTORY_RUN_ID=<run id>): a process the agent started in a
// session of its own, or whose parent died, is found by it.
func RunMarker(runID string) string { return "FACTORY_RUN_ID=" + runID }

// turnProcesses are the live processes of a turn, this process aside: the
// descendants of leader (while the tree is intact), and every process
// whose environment holds marker, with their descendants. It reads /proc;
// a process whose environment it may not read is found through its
// parents only.
func turnProcesses(leader int, marker string) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	var roots []int
	if leader > 0 {
		roots = append(roots, leader)
	}
	self := os.Getpid()
	want := []byte(marker + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid <= 1 {
			continue
		}
		st, ok := readProcStat(pid)
		if !ok || st.state == 'Z' {
			continue
		}
		children[st.ppid] = append(children[st.ppid], pid)
		if marker != "" && hasEnv(pid, want) {
			roots = append(roots, pid)
		}
	}
	var out []int
	seen := map[int]bool{}
	for len(roots) > 0 {
		pid := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if pid != leader || alive(pid) {
			out = append(out, pid)
		}
		roots = append(roots, children[pid]...)
	}
	slices.Sort(out)
	return out
}

// hasEnv reports whether a process's environment holds the entry (with
// its trailing NUL): the first 1 MiB of it is read.
func hasEnv(pid int, entry []byte) bool {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return false
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, 1<<20))
	return bytes.HasPrefix(b, entry) || bytes.Contains(b, append([]byte{0}, entry...))
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	st, ok := readProcStat(pid)
	return ok && st.state != 'Z'
}

// endTree ends what is left of a turn: SIGTERM to its process group and
// every process of its tree, then, after grace, SIGKILL to those still
// there. It returns once none is left (or after the SIGKILL).
func endTree(leader int, marker string, grace time.Duration) {
	pids := turnProcesses(leader, marker)
	if leader > 0 {
		_ = syscall.Kill(-leader, syscall.SIGTERM)
	}
	if len(pids) == 0 {
		return
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !slices.ContainsFunc(pids, alive) {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	killTree(leader, marker)
}

// killTree sends SIGKILL to the turn's process group and every process
// of its tree, twice over (a process may start another meanwhile).
func killTree(leader int, marker string) {
	for range 2 {
		if leader > 0 {
			_ = syscall.Kill(-leader, syscall.SIGKILL)
		}
		for _, pid := range turnProcesses(leader, marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
