package server_test

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"factory/internal/server"
)

// webClient is an HTTP client with cookies, from a chosen loopback address,
// that does not follow redirects (the tests read them).
func webClient(t testing.TB, from string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{}
	if from != "" {
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}).DialContext
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Jar: jar, Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// signInForm opens the sign-in page as a browser does and posts its form
// with key; it returns the answer.
func signInForm(t testing.TB, h *harness, c *http.Client, key string, headers ...string) *http.Response {
	t.Helper()
	resp, err := c.Get(h.url + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	form := url.Values{"key": {key}, "csrf": {between(string(b), `name="csrf" value="`, `"`)}}
	req, _ := http.NewRequest(http.MethodPost, h.url+"/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range resp.Cookies() {
		if ck.Secure {
			req.AddCookie(ck) // the browser's side of a TLS proxy: the jar keeps Secure cookies off plain HTTP
		}
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == "factory_session" && c.Value != "" {
			return c
		}
	}
	return nil
}

// TestSignInCSRF: the sign-in form had no CSRF token, so another site
// could sign a visitor's browser in with the attacker's key (login CSRF:
// what the visitor then types, a prompt, a secret they reveal, is the
// attacker's to read). The attack: the form posted from elsewhere, without
// the token its own page gives, or by a page of another site; both are
// refused, and the dashboard's own form signs in.
func TestSignInCSRF(t *testing.T) {
	h := start(t)
	c := webClient(t, "")
	resp, err := c.PostForm(h.url+"/ui/login", url.Values{"key": {adminKey}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || sessionCookie(resp) != nil {
		t.Errorf("a sign-in without the form's token: %d, session %v", resp.StatusCode, sessionCookie(resp))
	}
	if resp := signInForm(t, h, webClient(t, ""), adminKey, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"); resp.StatusCode != http.StatusForbidden || sessionCookie(resp) != nil {
		t.Errorf("a sign-in posted by another site: %d, session %v", resp.StatusCode, sessionCookie(resp))
	}
	if resp := signInForm(t, h, webClient(t, ""), adminKey); resp.StatusCode != http.StatusSeeOther || sessionCookie(resp) == nil {
		t.Errorf("the dashboard's own form: %d, session %v", resp.StatusCode, sessionCookie(resp))
	}
}

// TestSignInThrottled: the sign-in form took any number of guesses. The
// attack: wrong keys from one address; after ten in a minute it is
// answered 429 with Retry-After, the right key included, while another
// address still signs in.
func TestSignInThrottled(t *testing.T) {
	h := start(t)
	c := webClient(t, "127.0.0.2")
	for i := range 10 {
		if resp := signInForm(t, h, c, "fk_wrong_guess_"+strings.Repeat("x", i+1)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong key %d: %d", i+1, resp.StatusCode)
		}
	}
	resp := signInForm(t, h, c, adminKey)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || sessionCookie(resp) != nil {
		t.Fatalf("past ten failures: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := signInForm(t, h, webClient(t, "127.0.0.3"), adminKey); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("another address: %d", resp.StatusCode)
	}
}

// TestSessionCookieSecureBehindTLS: behind a proxy that terminates TLS
// (--public-url https://...) the request reaches the server in plain HTTP,
// and the session cookie went without Secure: a browser would send it
// over plain HTTP to the same host. The attack: sign in through such a
// server; the cookies are Secure.
func TestSessionCookieSecureBehindTLS(t *testing.T) {
	h := startConfigured(t, func(c *server.Config) { c.PublicURL = "https://factory.example.com" }, nil)
	c := webClient(t, "")
	resp, err := c.Get(h.url + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if !ck.Secure {
			t.Errorf("the sign-in page's cookie %s is not Secure", ck.Name)
		}
	}
	resp = signInForm(t, h, c, adminKey)
	if ck := sessionCookie(resp); ck == nil || !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("the session cookie behind TLS: %d %+v", resp.StatusCode, ck)
	}
}
