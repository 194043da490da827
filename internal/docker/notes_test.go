package docker

import (
	"strings"
	"testing"

	"factory/internal/runtime"
)

// TestNoteLines: an ACP agent's stderr, however it is cut into writes: the
// script's lines (the turn's nonce first) become notes, everything else
// goes to the kept stderr; a line that only looks like a note (another
// nonce, the nonce not first, no space after it) is the agent's; an
// endless line is kept bounded.
func TestNoteLines(t *testing.T) {
	const nonce = "factory:n0nce"
	cases := []struct {
		name, in  string
		notes     []string
		stderrHas string
	}{
		{"notes and output", nonce + " setup 1/1: true\nwarming up\n" + nonce + " agent starting\n", []string{"setup 1/1: true", "agent starting"}, "warming up"},
		{"forged nonce", "factory:other agent starting\n x" + nonce + " agent starting\n" + nonce + "agent starting\n", nil, "factory:other"},
		{"no newline yet", nonce + " setup 1/2: a", nil, ""},
		{"empty and CR lines", "\n\r\n" + nonce + " \n", []string{""}, "\r"},
		{"hostile bytes", "\x00\xff\xfe" + nonce + " x\n", nil, "\x00"},
		{"endless line", strings.Repeat("A", maxNoteLine+10), nil, "AAAA"},
	}
	for _, tc := range cases {
		for _, chunk := range []int{1, 3, 1 << 20} {
			var notes []string
			stderr := &runtime.Tail{Max: runtime.MaxStderr}
			n := &noteLines{nonce: nonce, sink: stderr, note: func(e runtime.Event) {
				notes = append(notes, strings.TrimPrefix(e.Message, nonce+" "))
			}}
			for b := []byte(tc.in); len(b) > 0; {
				k := min(chunk, len(b))
				if w, err := n.Write(b[:k]); w != k || err != nil {
					t.Fatalf("%s: Write = %d, %v", tc.name, w, err)
				}
				b = b[k:]
			}
			if strings.Join(notes, "|") != strings.Join(tc.notes, "|") || !strings.Contains(stderr.String(), tc.stderrHas) {
				t.Errorf("%s (writes of %d): notes %q, stderr %q", tc.name, chunk, notes, stderr.String())
			}
			if len(n.buf) > maxNoteLine {
				t.Errorf("%s: %d bytes held for a line's end", tc.name, len(n.buf))
			}
		}
	}
}

// FuzzNoteLines: whatever an agent writes to stderr, a note is only ever a
// whole line that begins with the nonce, and what is held stays bounded.
func FuzzNoteLines(f *testing.F) {
	const nonce = "factory:n0nce"
	for _, s := range []string{nonce + " agent starting\n", "x\n" + nonce, "\n\n", nonce + nonce + "\n"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, in string, chunk int) {
		chunk = max(1, chunk%64)
		n := &noteLines{nonce: nonce, sink: &runtime.Tail{Max: 1 << 10}, note: func(e runtime.Event) {
			if !strings.HasPrefix(e.Message, nonce+" ") || strings.Contains(e.Message, "\n") {
				t.Fatalf("a note that is not the script's: %q", e.Message)
			}
		}}
		for b := []byte(in); len(b) > 0; b = b[min(chunk, len(b)):] {
			_, _ = n.Write(b[:min(chunk, len(b))])
		}
		if len(n.buf) > maxNoteLine {
			t.Fatalf("%d bytes held", len(n.buf))
		}
	})
}

// FuzzSetupNote: a note an agent forges is read as a failed setup command
// only in the script's own form ("setup failed INDEX STATUS"), and never
// panics.
func FuzzSetupNote(f *testing.F) {
	for _, s := range []string{"setup failed 1 3", "setup failed", "setup failed x y", "setup 1/2: true", "setup failed 99999999999999999999 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		s := &scriptState{}
		ours := s.setupNote(msg)
		if ours != strings.HasPrefix(msg, setupFailedNote) {
			t.Fatalf("%q taken as the script's: %v", msg, ours)
		}
		if s.failed && len(strings.Fields(strings.TrimPrefix(msg, setupFailedNote))) != 2 {
			t.Fatalf("%q read as a failure", msg)
		}
	})
}
