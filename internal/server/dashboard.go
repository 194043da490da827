package server

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync"
	"time"

	"factory"
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

// sessionTTL is how long a dashboard session lasts.
const sessionTTL = 12 * time.Hour

// session is a signed-in browser: the key it signed in with (by its
// lookup hash: the key itself is never kept), its CSRF token, its expiry.
type session struct {
	KeyHash string
	KeyName string
	Scope   string
	CSRF    string
	Expires time.Time
}

// sessions are the dashboard's, in memory: a restart signs everyone out.
type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

const sessionCookie = "factory_session"

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
	if err != nil || key.RevokedAt != nil {
		return nil, nil
	}
	cp := *sess
	cp.Scope = key.Scope
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
	mux.Handle("GET /ui/login", securityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.render(w, "login.html", page{Title: "Sign in"}) })))
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
}

// page is what the sign-in and error pages get; the others get a map with
// at least Title and Session.
type page struct {
	Title   string
	Session *session
	Error   string
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
			if r.Method != http.MethodGet {
				http.Error(w, "sign in first", http.StatusForbidden)
				return
			}
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost && !csrfOK(r, sess) {
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

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimSpace(r.PostFormValue("key"))
	rec, err := s.store.APIKeyByValue(key)
	if key == "" || errors.Is(err, store.ErrNotFound) || err == nil && rec.RevokedAt != nil {
		w.WriteHeader(http.StatusUnauthorized)
		s.render(w, "login.html", page{Title: "Sign in", Error: "That key is unknown or revoked."})
		return
	}
	if err != nil {
		http.Error(w, "the store cannot be read", http.StatusInternalServerError)
		return
	}
	id := randomToken()
	sess := &session{KeyHash: store.HashAPIKey(key), KeyName: rec.Name, Scope: rec.Scope, CSRF: randomToken(), Expires: time.Now().Add(sessionTTL)}
	s.ui.mu.Lock()
	if s.ui.m == nil {
		s.ui.m = map[string]*session{}
	}
	s.ui.m[id] = sess
	s.ui.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, Expires: sess.Expires})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ *session) error {
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.ui.mu.Lock()
		delete(s.ui.m, c.Value)
		s.ui.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
	return nil
}
