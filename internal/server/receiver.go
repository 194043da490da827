package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"factory"
)

// pushTarget is a source that a push to a git remote concerns: the git
// source's URL and ref ("" for the remote's HEAD).
type pushTarget interface {
	RemoteURL() string
	RemoteRef() string
}

// pushEvent is what the receiver reads of a push notification: GitHub's
// push event and GitLab's push hook name the repository and the ref.
type pushEvent struct {
	Ref        string `json:"ref"`
	Repository struct {
		CloneURL string `json:"clone_url"`
		SSHURL   string `json:"ssh_url"`
		HTMLURL  string `json:"html_url"`
		GitURL   string `json:"git_url"`
	} `json:"repository"`
	Project struct {
		HTTPURL string `json:"git_http_url"`
		SSHURL  string `json:"git_ssh_url"`
		WebURL  string `json:"web_url"`
	} `json:"project"`
}

func (e *pushEvent) urls() []string {
	var out []string
	for _, u := range []string{e.Repository.CloneURL, e.Repository.SSHURL, e.Repository.HTMLURL, e.Repository.GitURL,
		e.Project.HTTPURL, e.Project.SSHURL, e.Project.WebURL} {
		if u != "" {
			out = append(out, normalizeRepoURL(u))
		}
	}
	return out
}

// receivePush is POST /hooks/push: a git host's push notification, signed
// as GitHub signs (X-Hub-Signature-256) or carrying the token (GitLab's
// X-Gitlab-Token, or Authorization: Bearer), syncs at once every git-sourced
// factory of the pushed repository and branch, as Flux's Receiver does;
// polling stays as the safety net. It answers 202 with the factories it
// syncs.
func (s *Server) receivePush(w http.ResponseWriter, r *http.Request) error {
	secret, err := s.pushSecret()
	if err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, factory.MaxWebhookBodyBytes+1))
	if err != nil || len(body) > factory.MaxWebhookBodyBytes {
		return errorf(CodeInvalidRequest, "the body could not be read, or is over 256 KB")
	}
	if !pushAuthentic(r, body, secret) {
		s.log.Warn("push notification refused: no valid signature or token", "client", r.RemoteAddr)
		return errorf(CodeAuthenticationRequired, "sign the body as GitHub does (X-Hub-Signature-256) or send the token (X-Gitlab-Token or Authorization: Bearer)")
	}
	if r.Header.Get("X-GitHub-Event") == "ping" {
		writeJSON(w, http.StatusOK, map[string]any{"factories": []string{}})
		return nil
	}
	var ev pushEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return errorf(CodeInvalidRequest, "the body is not a push event: "+err.Error())
	}
	names := s.pushedFactories(&ev)
	for _, name := range names {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_ = s.SyncNow(ctx, name)
		}()
	}
	s.log.Info("push notification", "ref", ev.Ref, "factories", strings.Join(names, ","))
	writeJSON(w, http.StatusAccepted, map[string]any{"factories": names})
	return nil
}

// pushSecret reads the receiver's managed secret, at each request: a
// rotation is in force at once.
func (s *Server) pushSecret() ([]byte, error) {
	sec, err := s.store.Secret(s.cfg.PushSecret)
	if err != nil {
		return nil, fmt.Errorf("the push receiver's secret %q: %w", s.cfg.PushSecret, err)
	}
	sealed, err := s.store.SealedSecret(sec.Name, sec.Version)
	if err != nil {
		return nil, err
	}
	return s.applier.Keyring.Open(sec.Name, sealed)
}

// pushAuthentic checks GitHub's signature, or the token, in constant time.
func pushAuthentic(r *http.Request, body, secret []byte) bool {
	if sig, ok := strings.CutPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256="); ok {
		got, err := hex.DecodeString(sig)
		m := hmac.New(sha256.New, secret)
		m.Write(body)
		return err == nil && hmac.Equal(got, m.Sum(nil))
	}
	token := r.Header.Get("X-Gitlab-Token")
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		token = bearer
	}
	return token != "" && subtle.ConstantTimeCompare([]byte(token), secret) == 1
}

// pushedFactories are the factories whose git source is the pushed
// repository, at the pushed branch (or following the remote's HEAD).
func (s *Server) pushedFactories(ev *pushEvent) []string {
	urls := ev.urls()
	branch := strings.TrimPrefix(ev.Ref, "refs/heads/")
	names := []string{}
	for name, r := range s.runners {
		t, ok := r.Source.(pushTarget)
		if !ok {
			continue
		}
		ref := t.RemoteRef()
		matches := false
		for _, u := range urls {
			matches = matches || u == normalizeRepoURL(t.RemoteURL())
		}
		if matches && (ref == "" || ref == branch || ref == ev.Ref) {
			names = append(names, name)
		}
	}
	return names
}

var scpLike = regexp.MustCompile(`^[^/\s@]+@([^/\s:]+):(.*)$`)

// normalizeRepoURL makes the spellings of one repository compare equal:
// https://github.com/acme/factory.git, git@github.com:acme/factory and
// ssh://git@github.com/acme/factory all become github.com/acme/factory.
func normalizeRepoURL(u string) string {
	u = strings.TrimSpace(u)
	if m := scpLike.FindStringSubmatch(u); m != nil {
		u = m[1] + "/" + m[2]
	}
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	if at := strings.IndexByte(u, '@'); at >= 0 && at < strings.IndexByte(u+"/", '/') {
		u = u[at+1:]
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	return strings.ToLower(u)
}
