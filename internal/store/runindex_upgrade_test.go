package store

import (
	"strings"
	"testing"
	"time"

	"factory"
)

// TestRunIndexUpgrade: a store of format 1 whose index predates the title
// and agent orders (and the newer fields) gets their entries at its next
// open, by the format migration.
func TestRunIndexUpgrade(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	b := s.NewBatch()
	for _, title := range []string{"b", "a"} {
		b.PutRun(&factory.Run{ID: "run_" + title, Title: title, State: factory.StateSucceeded, CreatedAt: now, UpdatedAt: now,
			Metadata: map[string]string{"k": title}}, nil)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	// Make it an index of version 1: no t/ or a/ orders, no metadata.
	b = s.NewBatch()
	n := 0
	s.scan(runIndexPrefix, func(key string, _ []byte) error {
		if strings.Contains(key, "/t/") || strings.Contains(key, "/a/") || strings.HasPrefix(key, runIndexPrefix+"md:") {
			b.delete(key)
			n++
		}
		return nil
	})
	b.delete(metaPrefix + "run_index")
	b.delete(metaPrefix + formatMeta)
	b.Commit()
	titles := func() []string {
		page, err := s.ListRuns(RunQuery{SortBy: "title", Asc: true, Limit: 10, Equal: map[string]string{MetadataField("k"): "a"}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range page.Runs {
			out = append(out, r.Title)
		}
		return out
	}
	if got := titles(); n == 0 || len(got) != 0 {
		t.Fatalf("removed %d entries; the old index still found %v", n, got)
	}
	s.Close()
	if s, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := titles(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("after the upgrade: %v, want [a]", got)
	}
	if v, _ := s.Meta("run_index"); v != runIndexVersion {
		t.Errorf("index version %q", v)
	}
}

func TestContainsFold(t *testing.T) {
	for _, tc := range []struct {
		s, sub string
		want   bool
	}{
		{"Find the WORM", "worm", true},
		{"Find the WORM", "Find", true},
		{"Find", "find the", false},
		{"", "", true},
		{"abc", "", true},
		{"Ünïcode Title", "ünï", true},
		{"ascii then Ü", "then ü", true},
		{"Kelvin k", "\u212a", true},
		{"nothing", "other", false},
	} {
		if got := containsFold(tc.s, tc.sub); got != tc.want {
			t.Errorf("containsFold(%q, %q) = %v", tc.s, tc.sub, got)
		}
	}
}

func TestSearchPrefilter(t *testing.T) {
	for _, tc := range []struct {
		raw, text string
		want      bool
	}{
		{`{"title":"Find the WORM"}`, "worm", true},
		{`{"title":"Find the WORM"}`, "WoRm", true},
		{`{"title":"Find the"}`, "worm", false},
		{`{"title":"wor"}`, "worm", false},
		{`{}`, "", true},
	} {
		if got := containsFoldASCII([]byte(tc.raw), tc.text); got != tc.want {
			t.Errorf("containsFoldASCII(%q, %q) = %v", tc.raw, tc.text, got)
		}
	}
	for text, want := range map[string]bool{"worm": true, "a b-c.d_e/f": true, `a"b`: false, "a<b": false, "a&b": false, "ü": false, "a\tb": false} {
		if plainASCII(text) != want {
			t.Errorf("plainASCII(%q) = %v", text, !want)
		}
	}
}
