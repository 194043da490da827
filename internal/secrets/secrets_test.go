package secrets_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"factory/internal/secrets"
)

func TestSealOpen(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(secrets.KeyEnv, "")
	k, err := secrets.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, secrets.KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, fi)
	}
	sealed, err := k.Seal("gh", []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "s3cret") {
		t.Fatal("sealed value holds the plaintext")
	}
	// The same key, loaded again, opens it; another name does not.
	k2, _ := secrets.LoadKeyring(dir)
	if v, err := k2.Open("gh", sealed); err != nil || string(v) != "s3cret" {
		t.Fatalf("open: %q %v", v, err)
	}
	if _, err := k2.Open("other", sealed); err == nil {
		t.Fatal("a sealed value opened under another name")
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := k2.Open("gh", sealed); err == nil {
		t.Fatal("a tampered value opened")
	}
	// Another key does not open it.
	t.Setenv(secrets.KeyEnv, base64.StdEncoding.EncodeToString(make([]byte, 32)))
	k3, err := secrets.LoadKeyring(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k3.Open("gh", sealed); err == nil {
		t.Fatal("opened with another key")
	}
	t.Setenv(secrets.KeyEnv, "short")
	if _, err := secrets.LoadKeyring(dir); err == nil {
		t.Fatal("accepted a bad key")
	}
}

func TestGenerated(t *testing.T) {
	tok := secrets.NewToken()
	if !secrets.URLSafe(tok) || len(tok) != 43 {
		t.Fatalf("token %q", tok)
	}
	sw := string(secrets.NewStandardWebhooksSecret())
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sw, "whsec_"))
	if !strings.HasPrefix(sw, "whsec_") || err != nil || len(raw) != 32 {
		t.Fatalf("standard webhooks secret %q", sw)
	}
	for _, v := range []string{"short", "has space and is long enough to pass length", strings.Repeat("a", 31),
		strings.Repeat("a", 32) + "/", strings.Repeat("a", 32) + "%2F", strings.Repeat("a", 32) + "+"} {
		if secrets.URLSafe([]byte(v)) {
			t.Fatalf("%q counted as URL-safe", v)
		}
	}
	// The v1alpha1 charset: letters, digits and - . _ ~ (docs/spec/v1alpha1.md).
	if v := "Abc-def.ghi_jkl~0123456789abcdefghij"; !secrets.URLSafe([]byte(v)) {
		t.Fatalf("%q refused", v)
	}
}
