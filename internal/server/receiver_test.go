package server

import "testing"

func TestNormalizeRepoURL(t *testing.T) {
	want := "github.com/acme/factory"
	for _, u := range []string{
		"https://github.com/acme/factory.git", "https://github.com/acme/factory", "https://GitHub.com/acme/factory/",
		"git@github.com:acme/factory.git", "ssh://git@github.com/acme/factory.git", "git://github.com/acme/factory.git",
		"https://user:token@github.com/acme/factory.git",
	} {
		if got := normalizeRepoURL(u); got != want {
			t.Errorf("%s: %s, want %s", u, got, want)
		}
	}
	if normalizeRepoURL("https://github.com/acme/other") == want {
		t.Error("another repository compares equal")
	}
}
