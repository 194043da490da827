package cursor_test

import (
	"testing"

	"factory/internal/cursor"
)

var key = []byte("0123456789abcdef0123456789abcdef")

func TestRoundTrip(t *testing.T) {
	c := cursor.Seal(key, "wh_1", "dlv_abc")
	if pos, err := cursor.Open(key, "wh_1", c); err != nil || pos != "dlv_abc" {
		t.Fatalf("%q %v", pos, err)
	}
}

func TestRejects(t *testing.T) {
	good := cursor.Seal(key, "wh_1", "dlv_abc")
	for name, c := range map[string]string{
		"empty":          "",
		"no mac":         "ZGx2X2FiYw",
		"edited":         "ZGx2X2FiZA" + good[10:],
		"other scope":    cursor.Seal(key, "wh_2", "dlv_abc"),
		"other key":      cursor.Seal([]byte("another key"), "wh_1", "dlv_abc"),
		"not base64":     "!!.!!",
		"truncated mac":  good[:len(good)-3],
		"far too long":   string(make([]byte, 5000)),
		"two separators": good + ".x",
	} {
		if _, err := cursor.Open(key, "wh_1", c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzOpen: no input opens unless Seal made it.
func FuzzOpen(f *testing.F) {
	f.Add(cursor.Seal(key, "s", "p"))
	f.Add("a.b")
	f.Add("")
	f.Fuzz(func(t *testing.T, c string) {
		pos, err := cursor.Open(key, "s", c)
		if err == nil && cursor.Seal(key, "s", pos) != c {
			t.Fatalf("opened a cursor Seal would not make: %q", c)
		}
	})
}
