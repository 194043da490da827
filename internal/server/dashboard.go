package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"factory"
	"factory/internal/budget"
	"factory/internal/problem"
	"factory/internal/store"
)

// The dashboard (docs/spec/dashboard.md): server-rendered pages from
// templates and assets embedded in the binary, with htmx (vendored by
// scripts/vendor-htmx.sh) for the parts that update themselves. Every
// action goes through the same service code as the HTTP API.

//go:embed ui/templates/*.html
var templateFiles embed.FS

//go:embed ui/assets
var assetFiles embed.FS

var pages = template.Must(template.ParseFS(templateFiles, "ui/templates/*.html"))

// The dashboard's sessions and sign-in (docs/dashboard.md): a session
// lasts sessionTTL; one key holds at most maxSessionsPerKey at once (a new
// one signs the oldest out); a sign-in form is good for signInTTL; one
// client address may fail signInFailuresPerMinute sign-ins a minute, and
// refused sign-ins are logged up to signInLoggedPerMinute a minute in all.
const (
	sessionTTL              = 12 * time.Hour
	maxSessionsPerKey       = 20
	signInTTL               = time.Hour
	signInFailuresPerMinute = factory.FailedAuthPerMinute
	signInLoggedPerMinute   = factory.RejectedPerMinute
)

// session is a signed-in browser: the key it signed in with (by its
// lookup hash: the key itself is never kept), its CSRF token, its expiry.
type session struct {
	KeyHash string
	KeyName string
	Scope   string
	CSRF    string
	Expires time.Time
	// Reader is who reads the inbox: the key's prefix, as the API's read
	// marks name it.
	Reader string
}

// sessions are the dashboard's, in memory: a restart signs everyone out.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

// add keeps a new session, first dropping those that expired and, when
// the key already holds maxSessionsPerKey, its oldest.
func (ss *sessions) add(id string, sess *session, now time.Time) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[string]*session{}
	}
	ss.pruneLocked(now)
	var held []string
	for k, v := range ss.m {
		if v.KeyHash == sess.KeyHash {
			held = append(held, k)
		}
	}
	slices.SortFunc(held, func(a, b string) int { return ss.m[a].Expires.Compare(ss.m[b].Expires) })
	for len(held) >= maxSessionsPerKey {
		delete(ss.m, held[0])
		held = held[1:]
	}
	ss.m[id] = sess
}

// prune drops the sessions that expired.
func (ss *sessions) prune(now time.Time) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.pruneLocked(now)
}

func (ss *sessions) pruneLocked(now time.Time) {
	for k, v := range ss.m {
		if now.After(v.Expires) {
			delete(ss.m, k)
		}
	}
}

func (ss *sessions) drop(id string) {
	ss.mu.Lock()
	delete(ss.m, id)
	ss.mu.Unlock()
}

// signIn guards the sign-in form: the key that signs its tokens (made at
// each start), the failed sign-ins per client address, the refusals
// logged.
type signIn struct {
	key    []byte
	failed *budget.Window
	logged *budget.Window
}

func newSignIn() *signIn {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return &signIn{key: key, failed: budget.New(signInFailuresPerMinute, time.Minute), logged: budget.New(signInLoggedPerMinute, time.Minute)}
}

// token is a new sign-in form's token: a nonce and an expiry, signed. It
// goes into the form and into a cookie of its own; a sign-in must bring
// both, equal, which a page of another site cannot (login CSRF).
func (si *signIn) token(now time.Time) string {
	payload := randomToken() + "." + strconv.FormatInt(now.Add(signInTTL).Unix(), 10)
	return payload + "." + si.mac(payload)
}

func (si *signIn) mac(payload string) string {
	m := hmac.New(sha256.New, si.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// valid says whether a sign-in brings the form's token and its cookie,
// equal, signed here and not expired.
func (si *signIn) valid(r *http.Request, now time.Time) bool {
	form := r.PostFormValue("csrf")
	c, err := r.Cookie(signInCookie)
	if err != nil || form == "" || subtle.ConstantTimeCompare([]byte(form), []byte(c.Value)) != 1 {
		return false
	}
	payload, sig, ok := cutLast(form, ".")
	_, expiry, ok2 := cutLast(payload, ".")
	exp, err := strconv.ParseInt(expiry, 10, 64)
	return ok && ok2 && err == nil && now.Unix() <= exp && hmac.Equal([]byte(sig), []byte(si.mac(payload)))
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

const (
	sessionCookie = "factory_session"
	signInCookie  = "factory_signin"
)

// crossOrigin refuses a state-changing request that a browser says comes
// from another site (Sec-Fetch-Site, else Origin against Host).
var crossOrigin = http.NewCrossOriginProtection()

// secureCookies says whether the dashboard's cookies are Secure: over TLS,
// or behind a proxy that terminates it (a public URL of https).
func (s *Server) secureCookies(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(strings.ToLower(s.cfg.PublicURL), "https://")
}

func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// current is the request's session, checked against the key's record each
// time: a revoked key signs its sessions out at once.
func (s *Server) current(r *http.Request) *session {
	sess, _ := s.sessionKey(r)
	return sess
}

// sessionKey is the request's session and the key it signed in with, or
// nils.
func (s *Server) sessionKey(r *http.Request) (*session, *factory.APIKey) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, nil
	}
	s.ui.mu.Lock()
	sess := s.ui.m[c.Value]
	if sess != nil && time.Now().After(sess.Expires) {
		delete(s.ui.m, c.Value)
		sess = nil
	}
	s.ui.mu.Unlock()
	if sess == nil {
		return nil, nil
	}
	key, err := s.store.APIKeyByHash(sess.KeyHash)
	if errors.Is(err, store.ErrNotFound) || err == nil && key.RevokedAt != nil {
		s.ui.drop(c.Value) // its key is gone: so is the session
		return nil, nil
	}
	if err != nil {
		return nil, nil
	}
	cp := *sess
	cp.Scope, cp.Reader = key.Scope, key.Prefix
	return &cp, key
}

// csrfOK checks a form's CSRF token against the session's.
func csrfOK(r *http.Request, sess *session) bool {
	got := r.PostFormValue("csrf")
	if got == "" {
		got = r.Header.Get("X-CSRF-Token")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) == 1
}

// securityHeaders: no inline scripts, no framing, no sniffing.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) dashboardRoutes(mux *routes) {
	assets, _ := fs.Sub(assetFiles, "ui/assets")
	mux.Handle("GET /ui/assets/", securityHeaders(http.StripPrefix("/ui/assets/", http.FileServerFS(assets))))
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusSeeOther))
	mux.Handle("GET /ui/login", securityHeaders(http.HandlerFunc(s.loginPage)))
	mux.Handle("POST /ui/login", securityHeaders(http.HandlerFunc(s.login)))
	mux.Handle("POST /ui/logout", s.page(s.logout))
	mux.Handle("GET /ui/{$}", s.page(s.overview))
	mux.Handle("POST /ui/factories/{uid}/sync", s.page(s.syncFactoryPage))
	mux.Handle("GET /ui/definition", s.page(s.definitionPage))
	mux.Handle("GET /ui/webhooks", s.page(s.webhooksPage))
	mux.Handle("GET /ui/webhooks/{uid}", s.page(s.webhookPage))
	mux.Handle("GET /ui/webhooks/{uid}/deliveries", s.page(s.deliveriesFragment))
	mux.Handle("POST /ui/webhooks/{uid}/toggle", s.page(s.toggleWebhook))
	mux.Handle("GET /ui/webhooks/{uid}/reveal", s.page(s.revealConfirm))
	mux.Handle("POST /ui/webhooks/{uid}/reveal", s.page(s.revealSecretPage))
	mux.Handle("GET /ui/webhooks/{uid}/deliveries/{id}", s.page(s.deliveryPage))
	mux.Handle("POST /ui/deliveries/{id}/redeliver", s.page(s.redeliverPage))
	mux.Handle("GET /ui/automations", s.page(s.automationsPage))
	mux.Handle("POST /ui/automations/{id}/test", s.page(s.testPayloadPage))
	mux.Handle("GET /ui/schedules", s.page(s.schedulesPage))
	mux.Handle("POST /ui/schedules/{id}/pause", s.page(s.scheduleAction(false)))
	mux.Handle("POST /ui/schedules/{id}/resume", s.page(s.scheduleAction(true)))
	mux.Handle("GET /ui/runs", s.page(s.runsPage))
	mux.Handle("POST /ui/runs", s.page(s.newRun))
	mux.Handle("GET /ui/runs/{runId}", s.page(s.runPage))
	mux.Handle("GET /ui/runs/{runId}/live", s.page(s.runLive))
	for _, action := range []string{"cancel", "interrupt", "followup"} {
		mux.Handle("POST /ui/runs/{runId}/"+action, s.page(s.runAction))
	}
	mux.Handle("GET /ui/tasks", s.page(s.tasksPage))
	mux.Handle("GET /ui/tasks/board", s.page(s.tasksBoard))
	mux.Handle("GET /ui/factories/{uid}/tasks/{taskUid}", s.page(s.taskPage))
	mux.Handle("GET /ui/factories/{uid}/tasks/{taskUid}/live", s.page(s.taskLive))
	for _, action := range []string{"stage", "cancel"} {
		mux.Handle("POST /ui/factories/{uid}/tasks/{taskUid}/"+action, s.page(s.taskAction))
	}
	mux.Handle("GET /ui/inbox", s.page(s.inboxPage))
	mux.Handle("GET /ui/inbox/items", s.page(s.inboxList))
	mux.Handle("GET /ui/inbox/count", s.page(s.inboxCount))
	mux.Handle("POST /ui/inbox/read", s.page(s.markAllRead))
	mux.Handle("POST /ui/inbox/items/{id}/answer", s.page(s.answerItem))
	mux.Handle("POST /ui/inbox/items/{id}/read", s.page(s.markItem(true)))
	mux.Handle("POST /ui/inbox/items/{id}/unread", s.page(s.markItem(false)))
}

// page is what the sign-in and error pages get; the others get a map with
// at least Title and Session.
type page struct {
	Title   string
	Session *session
	Error   string
	CSRF    string // the sign-in form's token
}

func (s *Server) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pages.ExecuteTemplate(w, name, data); err != nil {
		s.log.Error("rendering a page", "page", name, "err", err)
	}
}

// page wraps a dashboard handler: a session is required (else the sign-in
// page), and every POST carries the session's CSRF token (else 403).
func (s *Server) page(h func(http.ResponseWriter, *http.Request, *session) error) http.Handler {
	return securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess := s.current(r)
		if sess == nil {
			switch {
			case r.Method != http.MethodGet:
				http.Error(w, "sign in first", http.StatusForbidden)
			case r.Header.Get("HX-Request") == "true":
				// A part of a page reloading itself: the whole page goes
				// to sign-in, not the sign-in form into the part.
				w.Header().Set("HX-Redirect", "/ui/login")
				http.Error(w, "sign in first", http.StatusUnauthorized)
			default:
				http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			}
			return
		}
		if r.Method == http.MethodPost && (crossOrigin.Check(r) != nil || !csrfOK(r, sess)) {
			http.Error(w, "the form's CSRF token is missing or wrong: reload the page", http.StatusForbidden)
			return
		}
		if err := h(w, r, sess); err != nil {
			// In words, never a raw JSON body; an internal error's text
			// goes to the log only.
			status, msg := http.StatusInternalServerError, "something went wrong on the server: its log says what"
			if e := problem.Of(err); e != nil {
				status, msg = problem.Status(e.Code), e.Message
			} else {
				s.log.Error("a dashboard page failed", "path", r.URL.Path, "err", err)
			}
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(status)
			_ = pages.ExecuteTemplate(w, "error.html", page{Title: "Error", Session: sess, Error: msg})
		}
	}))
}

// loginPage is the sign-in form, with a token of its own in the form and
// in a cookie.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.renderLogin(w, r, http.StatusOK, "")
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	token := s.signIn.token(time.Now())
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Value: token, Path: "/ui/login", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.secureCookies(r), MaxAge: int(signInTTL / time.Second)})
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := pages.ExecuteTemplate(w, "login.html", page{Title: "Sign in", Error: msg, CSRF: token}); err != nil {
		s.log.Error("rendering a page", "page", "login.html", "err", err)
	}
}

// login signs a browser in with an API key. The form must be the
// dashboard's own (its token and cookie, posted from this origin); a client
// address past its failed sign-ins is answered 429, whatever the key.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	now, client := time.Now(), clientOf(r)
	if crossOrigin.Check(r) != nil || !s.signIn.valid(r, now) {
		s.signInRefused(client, "csrf", now)
		s.renderLogin(w, r, http.StatusForbidden, "This sign-in did not come from this page's own form: sign in again here.")
		return
	}
	if wait, full := s.signIn.failed.Full(client, now); full {
		s.signInRefused(client, "throttled", now)
		s.throttledLogin(w, r, wait)
		return
	}
	key := strings.TrimSpace(r.PostFormValue("key"))
	rec, err := s.store.APIKeyByValue(key)
	if key == "" || errors.Is(err, store.ErrNotFound) || err == nil && rec.RevokedAt != nil {
		s.signInRefused(client, "auth", now)
		if _, wait, ok := s.signIn.failed.Reserve(client, now); !ok {
			s.throttledLogin(w, r, wait)
			return
		}
		s.renderLogin(w, r, http.StatusUnauthorized, "That key is unknown or revoked.")
		return
	}
	if err != nil {
		http.Error(w, "the store cannot be read", http.StatusInternalServerError)
		return
	}
	id := randomToken()
	sess := &session{KeyHash: store.HashAPIKey(key), KeyName: rec.Name, Scope: rec.Scope, CSRF: randomToken(), Expires: now.Add(sessionTTL)}
	s.ui.add(id, sess, now)
	secure := s.secureCookies(r)
	http.SetCookie(w, &http.Cookie{Name: signInCookie, Value: "", Path: "/ui/login", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure})
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secure, Expires: sess.Expires})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (s *Server) throttledLogin(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	after := budget.RetryAfter(wait)
	w.Header().Set("Retry-After", strconv.Itoa(after))
	s.renderLogin(w, r, http.StatusTooManyRequests, fmt.Sprintf("Too many failed sign-ins from this address: try again in %d s.", after))
}

// signInRefused counts a refused sign-in, and logs it while the minute's
// budget of logged refusals lasts.
func (s *Server) signInRefused(client, reason string, now time.Time) {
	s.metrics.refusals.WithLabelValues("signin", reason).Inc()
	if _, _, ok := s.signIn.logged.Reserve("", now); ok {
		s.log.Warn("dashboard sign-in refused", "client", client, "reason", reason)
	}
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ *session) error {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.ui.drop(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.secureCookies(r)})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
	return nil
}
