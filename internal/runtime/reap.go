package runtime

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"factory"
)

// procStat is what /proc/<pid>/stat says of a process that reap and the
// end of a turn need.
type procStat struct {
	state byte // R, S, D, Z, ...
	ppid  int
	pgrp  int
	start uint64 // clock ticks after boot
}

// readProcStat reads /proc/<pid>/stat; ok is false when there is no such
// process (or no /proc).
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// the fields that follow are counted from its closing one.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, err0 := strconv.Atoi(f[1])                // field 4
	pgrp, err1 := strconv.Atoi(f[2])                // field 5
	start, err2 := strconv.ParseUint(f[19], 10, 64) // field 22
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, start: start}, err0 == nil && err1 == nil && err2 == nil
}

// ProcessOf is a started agent's process group as reap needs it: its
// leader's PID and start time.
func ProcessOf(pid int) factory.ProcessRef {
	ref := factory.ProcessRef{PID: pid}
	if st, ok := readProcStat(pid); ok {
		ref.Start = st.start
	}
	return ref
}

// Reap is reap, for a worker that finds the process groups of turns it
// ran before it died.
func Reap(ref factory.ProcessRef) bool { return reap(ref) }

// reap kills what is left of a run's agent process group after the server
// died under it, if it is still that group: its leader alive with the
// recorded start time, or, the leader gone (it dies with the server), the
// processes that remain in its group (Linux does not give a PID to a new
// process while a group of that ID exists). It reports whether it killed.
func reap(ref factory.ProcessRef) bool {
	if ref.PID <= 1 || ref.Start == 0 {
		return false // not recorded precisely enough to be sure it is ours
	}
	if st, ok := readProcStat(ref.PID); ok {
		if st.start != ref.Start || st.pgrp != ref.PID {
			return false // another process has the PID now
		}
	} else if !groupHasMembers(ref.PID) {
		return false
	}
	return syscall.Kill(-ref.PID, syscall.SIGKILL) == nil
}

// groupHasMembers reports whether any process is in the process group.
func groupHasMembers(pgid int) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok && st.pgrp == pgid {
			return true
		}
	}
	return false
}
