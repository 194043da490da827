package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/budget"
	"factory/internal/problem"
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
		PushedAt json.RawMessage `json:"pushed_at"`
		CloneURL string          `json:"clone_url"`
		SSHURL   string          `json:"ssh_url"`
		HTMLURL  string          `json:"html_url"`
		GitURL   string          `json:"git_url"`
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

// The push receiver's bounds (docs/security.md), the ingress's own:
// failed authentications per client address a minute, refusals logged a
// minute in all (from any number of addresses), and the window in which a
// notification is fresh and remembered.
const (
	pushFailedAuthPerMinute = factory.FailedAuthPerMinute
	pushLoggedPerMinute     = factory.RejectedPerMinute
	pushWindow              = factory.SignatureMaxAge
)

// pushGuard is the push receiver's memory: its budgets, and the
// notifications it accepted within the window, by the SHA-256 of their
// bodies.
type pushGuard struct {
	failed *budget.Window
	logged *budget.Window

	mu   sync.Mutex
	seen map[[sha256.Size]byte]time.Time
}

func newPushGuard() *pushGuard {
	return &pushGuard{failed: budget.New(pushFailedAuthPerMinute, time.Minute), logged: budget.New(pushLoggedPerMinute, time.Minute),
		seen: map[[sha256.Size]byte]time.Time{}}
}

// firstTime records a notification's body, and says whether it is the
// first time within the window; it forgets what left the window.
func (g *pushGuard) firstTime(body []byte, now time.Time) bool {
	sum := sha256.Sum256(body)
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, at := range g.seen {
		if now.Sub(at) > pushWindow {
			delete(g.seen, k)
		}
	}
	if _, seen := g.seen[sum]; seen {
		return false
	}
	g.seen[sum] = now
	return true
}

// receivePush is POST /hooks/push: a git host's push notification, signed
// as GitHub signs (X-Hub-Signature-256) or carrying the token (GitLab's
// X-Gitlab-Token, or Authorization: Bearer), syncs at once every git-sourced
// factory of the pushed repository and branch, as Flux's Receiver does;
// polling stays as the safety net. It answers 202 with the factories it
// syncs. A client past its failed authentications is answered 429; a
// signed notification must be of a push within the window; a notification
// received already within it is refused (409).
func (s *Server) receivePush(w http.ResponseWriter, r *http.Request) error {
	now, client := time.Now(), clientOf(r)
	if wait, full := s.push.failed.Full(client, now); full {
		s.pushRefused(client, "throttled", now)
		return &Error{Code: problem.Unavailable, RetryAfter: budget.RetryAfter(wait), Message: "too many failed authentications from this address; retry later"}
	}
	secret, err := s.pushSecret()
	if err != nil {
		return err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, factory.MaxWebhookBodyBytes+1))
	if err != nil || len(body) > factory.MaxWebhookBodyBytes {
		return errorf(CodeInvalidRequest, "the body could not be read, or is over 256 KB")
	}
	signed, ok := pushAuthentic(r, body, secret)
	if !ok {
		return s.pushAuthFailed(client, "auth", now, "sign the body as GitHub does (X-Hub-Signature-256) or send the token (X-Gitlab-Token or Authorization: Bearer)")
	}
	if r.Header.Get("X-GitHub-Event") == "ping" {
		writeJSON(w, http.StatusOK, map[string]any{"factories": []string{}})
		return nil
	}
	var ev pushEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return errorf(CodeInvalidRequest, "the body is not a push event: "+err.Error())
	}
	if signed {
		// A signature covers the body alone: the push's time in it is what
		// keeps a captured notification from serving for ever.
		if err := fresh(ev.Repository.PushedAt, now); err != nil {
			return s.pushAuthFailed(client, "stale", now, err.Error())
		}
	}
	if !s.push.firstTime(body, now) {
		s.pushRefused(client, "replay", now)
		return errorf(CodeConflict, "this notification was received already (within the last 5 minutes): a push is synced once")
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

// pushAuthFailed takes a failed authentication from the client's budget
// and answers 401, or 429 when the budget has no slot left.
func (s *Server) pushAuthFailed(client, reason string, now time.Time, msg string) error {
	s.pushRefused(client, reason, now)
	if _, wait, ok := s.push.failed.Reserve(client, now); !ok {
		return &Error{Code: problem.Unavailable, RetryAfter: budget.RetryAfter(wait), Message: "too many failed authentications from this address; retry later"}
	}
	return errorf(CodeAuthenticationRequired, msg)
}

// pushRefused counts a refusal, and logs it while the minute's budget of
// logged refusals lasts, so that no sender can fill the log.
func (s *Server) pushRefused(client, reason string, now time.Time) {
	s.metrics.refusals.WithLabelValues("push", reason).Inc()
	if _, _, ok := s.push.logged.Reserve("", now); ok {
		s.log.Warn("push notification refused", "client", client, "reason", reason)
	}
}

// fresh checks a push's time (GitHub's repository.pushed_at: Unix seconds,
// or an RFC 3339 time in events other than push) against the window, both
// ways.
func fresh(pushedAt json.RawMessage, now time.Time) error {
	at, err := pushTime(pushedAt)
	if err != nil {
		return err
	}
	if d := now.Sub(at); d > pushWindow || d < -pushWindow {
		return fmt.Errorf("the push (repository.pushed_at %s) is not within %s of now: a notification is taken while it is fresh", at.UTC().Format(time.RFC3339), pushWindow)
	}
	return nil
}

// pushTime reads repository.pushed_at.
func pushTime(raw json.RawMessage) (time.Time, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, errors.New("a signed notification must say when the push was (repository.pushed_at, as GitHub's push events do)")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		at, err := time.Parse(time.RFC3339, text)
		if err != nil {
			return time.Time{}, errors.New("repository.pushed_at is not a time")
		}
		return at, nil
	}
	var sec int64
	if err := json.Unmarshal(raw, &sec); err != nil {
		return time.Time{}, errors.New("repository.pushed_at is not a time")
	}
	return time.Unix(sec, 0), nil
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

// pushAuthentic checks GitHub's signature, or the token, in constant time;
// signed says which it was.
func pushAuthentic(r *http.Request, body, secret []byte) (signed, ok bool) {
	if sig, found := strings.CutPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256="); found {
		got, err := hex.DecodeString(sig)
		m := hmac.New(sha256.New, secret)
		m.Write(body)
		return true, err == nil && hmac.Equal(got, m.Sum(nil))
	}
	token := r.Header.Get("X-Gitlab-Token")
	if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found {
		token = bearer
	}
	return false, token != "" && subtle.ConstantTimeCompare([]byte(token), secret) == 1
}

// clientOf is a request's client address, without its port.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
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
