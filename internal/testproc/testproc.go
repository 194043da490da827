// Package testproc tells tests whether the processes an agent started are
// gone: what "no process is left" means, checked in /proc.
package testproc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Alive reports whether a process exists and is not a zombie.
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// PIDs reads the process IDs a test's agent script wrote into dir (files
// pid and child).
func PIDs(dir string) []int {
	var out []int
	for _, name := range []string{"pid", "child"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		out = append(out, n)
	}
	return out
}

// NoneLeft fails when a process the script recorded in dir is still alive
// 2 s on.
func NoneLeft(t testing.TB, dir string) {
	t.Helper()
	Gone(t, 2*time.Second, PIDs(dir)...)
}

// Gone fails when one of the processes is still alive after within.
func Gone(t testing.TB, within time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, pid := range pids {
		for Alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d outlived its turn", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// WithEnv are the live processes whose environment holds the entry
// (FACTORY_RUN_ID=<run id>, say): how "no process of the run is left" is
// checked, whatever session or parent a process has.
func WithEnv(entry string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(b), "\x00") {
			if kv == entry && Alive(pid) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// NoneWithEnv fails when a process whose environment holds the entry is
// still alive after within.
func NoneWithEnv(t testing.TB, within time.Duration, entry string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		left := WithEnv(entry)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes with %s outlived their turn: %v", entry, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
