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
// parents only. Only processes started at since or later (clock ticks
// since boot, as /proc says; 0: all) can be the turn's: the environments
// of older ones are not read (reading each is most of a scan's cost).
func turnProcesses(leader int, marker string, since uint64) []int {
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
		if marker != "" && st.start >= since && hasEnv(pid, want) {
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

// bootTicks is now in clock ticks since boot (USER_HZ, 100 a second, as
// /proc's start times count), less a second of margin; 0 when /proc does
// not say.
func bootTicks() uint64 {
	b, err := os.ReadFile("/proc/uptime")
	if err != nil {
		return 0
	}
	up, err := strconv.ParseFloat(string(bytes.Fields(b)[0]), 64)
	if err != nil || up < 1 {
		return 0
	}
	return uint64((up - 1) * 100)
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	st, ok := readProcStat(pid)
	return ok && st.state != 'Z'
}

// endTree ends what is left of a turn: SIGTERM to its process group and
// every process of its tree, then, after grace, SIGKILL to those still
// there. It returns once none is left (or after the SIGKILL).
func endTree(leader int, marker string, since uint64, grace time.Duration) {
	pids := turnProcesses(leader, marker, since)
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
	killTree(leader, marker, since)
}

// killTree sends SIGKILL to the turn's process group and every process
// of its tree, twice over when it found any (one may start another
// meanwhile).
func killTree(leader int, marker string, since uint64) {
	for range 2 {
		if leader > 0 {
			_ = syscall.Kill(-leader, syscall.SIGKILL)
		}
		pids := turnProcesses(leader, marker, since)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(pids) == 0 {
			return
		}
	}
}
