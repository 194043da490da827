package secrets

import (
	"bytes"
	"testing"
)

// TestDerive: a purpose's key is the same at every start, another
// purpose's is unrelated, and neither is the keyring's own.
func TestDerive(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(KeyEnv, "")
	a, err := LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	one, again, other := a.Derive("nats"), b.Derive("nats"), a.Derive("something else")
	if !bytes.Equal(one, again) || bytes.Equal(one, other) || bytes.Equal(one, a.key) || len(one) != 32 {
		t.Fatalf("derived keys: %x %x %x", one, again, other)
	}
}
