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
// the GitHub API with the run's token. "" when there is no such checkout.
func openDemoPullRequest(cwd, title string) (string, error) {
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
	body, _ := json.Marshal(map[string]any{"title": title, "head": branch, "base": base, "body": "Opened by the bundled demo agent (no AI was used)."})
	req, err := http.NewRequest("POST", strings.TrimRight(api, "/")+"/repos/"+repo+"/pulls", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var pr struct {
		HTMLURL string `json:"html_url"`
		Message string `json:"message"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&pr)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("opening a pull request: %s %s", resp.Status, pr.Message)
	}
	return pr.HTMLURL, nil
}
