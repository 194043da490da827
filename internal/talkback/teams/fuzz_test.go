package teams_test

import (
	"testing"
	"time"

	"factory/internal/talkback/teams"
)

// FuzzParse: any bytes parse as a token or fail, never panic; a parsed
// token checked against no keys never passes.
func FuzzParse(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln")
	f.Add("a.b.c")
	f.Add("..")
	f.Add("eyJhbGciOiJub25lIn0.eyJhdWQiOlsiYSJdfQ.")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := teams.Parse(s)
		if err != nil {
			return
		}
		if tok.Check(map[string]*teams.Key{}, "app", "https://s/", "msteams", time.Now()) == nil {
			t.Fatal("a token passed with no keys")
		}
	})
}

// FuzzParseKeys: any bytes give keys or an error, never a panic, and
// every key is RSA of at least 2048 bits with an odd exponent.
func FuzzParseKeys(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"RSA","kid":"k","n":"AQAB","e":"AQAB"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","kid":"k"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := teams.ParseKeys(b)
		if err != nil {
			return
		}
		for kid, k := range keys {
			if k.Public.N.BitLen() < 2041 || k.Public.E%2 == 0 || kid == "" {
				t.Fatalf("key %s: %d bits, e %d", kid, k.Public.N.BitLen(), k.Public.E)
			}
		}
	})
}
