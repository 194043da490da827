package budget

import (
	"testing"
	"time"
)

func TestWindow(t *testing.T) {
	l := New(3, time.Minute)
	t0 := time.Unix(1000, 0)
	for i := 0; i < 3; i++ {
		if _, _, ok := l.Reserve("k", t0.Add(time.Duration(i)*time.Second)); !ok {
			t.Fatalf("slot %d refused", i)
		}
	}
	_, wait, ok := l.Reserve("k", t0.Add(10*time.Second))
	if ok || RetryAfter(wait) != 50 {
		t.Fatalf("4th in a minute: ok=%v retry=%d, want refused with 50 s", ok, RetryAfter(wait))
	}
	// The oldest leaves the window: a slot frees.
	if _, _, ok := l.Reserve("k", t0.Add(60*time.Second+time.Millisecond)); !ok {
		t.Fatal("no slot after the oldest left the window")
	}
	// A released reservation gives its slot back.
	l2 := New(1, time.Minute)
	release, _, _ := l2.Reserve("k", t0)
	release()
	if _, _, ok := l2.Reserve("k", t0); !ok {
		t.Fatal("a released slot was not given back")
	}
	// Keys are independent, and idle keys are swept.
	if wait, full := l.Full("other", t0); full || wait != 0 {
		t.Fatal("another key is full")
	}
	l.Reserve("idle", t0)
	l.Full("x", t0.Add(3*time.Minute))
	if len(l.keys) != 0 {
		t.Fatalf("idle keys kept: %v", len(l.keys))
	}
	if RetryAfter(0) != 1 || RetryAfter(1500*time.Millisecond) != 2 {
		t.Fatal("Retry-After rounding")
	}
}
