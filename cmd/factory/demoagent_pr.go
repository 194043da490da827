package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// openDemoPullRequest is what the demo agent does when its prompt asks for
// a pull request and its workspace is a checkout of a GitHub repository
// (docs/codehosts.md): it commits SUMMARY.md on the run's branch, pushes
// it with the credential git was given, and opens a pull request through
// the GitHub API with the run's token; section, when its prompt has one
// (a self-improvement run's Regressions addressed), goes into the pull
// request's description. "" when there is no such checkout.
func openDemoPullRequest(cwd, title, section string) (string, error) {
	token, api := os.Getenv("GH_TOKEN"), os.Getenv("GITHUB_API_URL")
	repo, branch, base := os.Getenv("FACTORY_REPOSITORY"), os.Getenv("FACTORY_BRANCH"), os.Getenv("FACTORY_BASE_BRANCH")
	if _, err := os.Stat(filepath.Join(cwd, ".git")); err != nil || token == "" || api == "" || repo == "" || branch == "" {
		return "", nil
	}
	git := func(args ...string) error {
		cmd := exec.Command("git", args...)
		cmd.Dir = cwd
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	for _, args := range [][]string{{"add", "SUMMARY.md"}, {"commit", "-q", "-m", "Add the demo agent's summary"}, {"push", "-q", "origin", "HEAD:refs/heads/" + branch}} {
		if err := git(args...); err != nil {
			return "", err
		}
	}
	api = strings.TrimRight(api, "/") + "/repos/" + repo + "/pulls"
	owner, _, _ := strings.Cut(repo, "/")
	// One pull request a branch: an open one is the run's already.
	var open []struct {
		HTMLURL string `json:"html_url"`
	}
	if err := githubCall("GET", api+"?state=open&head="+owner+":"+branch, token, nil, http.StatusOK, &open); err != nil {
		return "", err
	}
	if len(open) > 0 {
		return open[0].HTMLURL, nil
	}
	var pr struct {
		HTMLURL string `json:"html_url"`
	}
	body := "Opened by the bundled demo agent (no AI was used)."
	if section != "" {
		body += "\n\n" + section + "\n"
	}
	err := githubCall("POST", api, token, map[string]any{"title": title, "head": branch, "base": base, "body": body}, http.StatusCreated, &pr)
	return pr.HTMLURL, err
}

// githubCall calls the GitHub API with a token; want is the status it
// expects, out what it decodes the answer into.
func githubCall(method, url, token string, in any, want int, out any) error {
	var body *bytes.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	} else {
		body = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%s %s: %s %s", method, url, resp.Status, e.Message)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
