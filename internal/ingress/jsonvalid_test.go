package ingress

import (
	"encoding/json"
	"strings"
	"testing"
)

var jsonCases = []string{
	``, ` `, `{}`, `[]`, ` { } `, `[ ]`, `{"a":1}`, `{"a" : 1 , "b":[1,2,{"c":null}]}`, `[1,]`, `[,1]`, `{"a":1,}`,
	`{,}`, `{"a"}`, `{"a":}`, `{1:2}`, `{"a":1 "b":2}`, `[1 2]`, `[[[]]]`, `[[[]]`, `]`, `}`, `{]`, `[}`,
	`"x"`, `"\"\\\/\b\f\n\r\t\u00e9\uD83D"`, `"\u12"`, `"\u12g4"`, `"\x"`, "\"a\x01\"", "\"a\x1f\"", "\"\x7f\xff\xfe\"",
	`"unterminated`, `"a\`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e10`,
	`1 2`, `true`, `false`, `null`, `tru`, `nul`, `True`, `nullx`, `truefalse`, `[true,false,null]`, "\t\n\r 1 \t\n\r",
	"\v1", `{"a":{"b":{"c":[1,"2",3.0e1]}}}`, `[-]`, `[01]`, `{"\u0000":1}`, `123abc`, `"a"b`, `[1]]`, `{}}`,
}

func TestValidJSON(t *testing.T) {
	for _, c := range jsonCases {
		if got, want := validJSON([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("validJSON(%q) = %v, encoding/json says %v", c, got, want)
		}
	}
	// Special bytes at every offset of the eight-byte words strings are
	// scanned in.
	for off := 0; off < 24; off++ {
		for _, special := range []string{`"`, `\`, `\n`, `\u00e9`, "\x00", "\x01", "\x1f", " ", "\x7f", "\x80", "\xff", "é"} {
			b := []byte(`"` + strings.Repeat("a", off) + special + strings.Repeat("b", 9) + `"`)
			if got, want := validJSON(b), json.Valid(b); got != want {
				t.Errorf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
			}
		}
	}
	// Nesting: encoding/json allows 10,000 levels and no more.
	for _, depth := range []int{9999, 10000, 10001, 200000} {
		for _, open := range []string{"[", `{"k":`} {
			close := map[string]string{"[": "]", `{"k":`: "}"}[open]
			b := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
			if got, want := validJSON(b), json.Valid(b); got != want {
				t.Errorf("depth %d of %q: %v, encoding/json says %v", depth, open, got, want)
			}
		}
	}
}

func FuzzValidJSONAgrees(f *testing.F) {
	for _, c := range jsonCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	body := []byte(`{"event":"build.failed","repository":{"name":"factory","id":123456,"private":false},"pad":"` + strings.Repeat("x", 900) + `"}`)
	b.Run("encoding/json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			json.Valid(body)
		}
	})
	b.Run("validJSON", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			validJSON(body)
		}
	})
}
