package factory_test

import (
	"strings"
	"testing"

	"factory"
)

func TestMintID(t *testing.T) {
	a, b := factory.MintID("x_", []byte{1, 2}, 10), factory.MintID("x_", []byte{1, 2}, 10)
	if a == b || !strings.HasPrefix(a, "x_") || len(a) != len("x_")+20 {
		t.Fatalf("MintID: %q, %q", a, b)
	}
	// The head orders IDs: a smaller head gives a smaller ID.
	if lo, hi := factory.MintID("", []byte{1}, 4), factory.MintID("", []byte{2}, 4); lo >= hi {
		t.Fatalf("%q sorts after %q", lo, hi)
	}
	if long := factory.MintID("", make([]byte, 30), 30); len(long) != 96 {
		t.Fatalf("a long ID: %d characters", len(long))
	}
	if !factory.ValidUID(factory.PrefixRun, factory.NewUID(factory.PrefixRun)) {
		t.Fatal("NewUID does not make a valid UID")
	}
}

func TestDerivedID(t *testing.T) {
	a := factory.DerivedID("run_", "dlv_1", "au_1")
	if a != factory.DerivedID("run_", "dlv_1", "au_1") {
		t.Fatal("the same parts give another ID")
	}
	// Parts are separated: moving a character from one part to the next
	// gives another ID.
	if a == factory.DerivedID("run_", "dlv_", "1au_1") || a == factory.DerivedID("run_", "dlv_1", "au_2") {
		t.Fatal("other parts give the same ID")
	}
	if !factory.ValidUID("run_", a) {
		t.Fatalf("%q is not a valid ID", a)
	}
}
