package app

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// Signing in to the console and out of it: the sessions, the one-time
// sign-in links, the cookie, and the checks every request passes before
// its page (consolePublic, consolePage), the CSRF token among them.

const (
	consoleCookie = "rxgate_console"
	// consoleMaxSessions bounds the sessions kept; signing in beyond it
	// ends the session closest to expiry.
	consoleMaxSessions = 1024
)

// consoleLinkTTL bounds a one-time sign-in link's life (and
// admin.console_session_ttl, when shorter, does).
const consoleLinkTTL = time.Hour

// consoleSessions are the signed-in operators and the unused one-time
// sign-in links, by the SHA-256 of their tokens.
type consoleSessions struct {
	mu       sync.Mutex
	sessions map[[32]byte]*consoleSession
	links    map[[32]byte]time.Time // expiry
}

// consoleSession is one signed-in browser.
type consoleSession struct {
	csrf    string
	expires time.Time
	// who signed in; a stored key is read again on every request
	// (consolePage), so that its revocation ends the session at once.
	who    *operatorIdentity
	secret *secretData // a new secret waiting to be shown once; guarded by consoleSessions.mu
}

func newConsoleSessions() *consoleSessions {
	return &consoleSessions{sessions: map[[32]byte]*consoleSession{}, links: map[[32]byte]time.Time{}}
}

// start opens a session of who and returns its token.
func (s *consoleSessions) start(now time.Time, ttl time.Duration, who *operatorIdentity) (token string, sess *consoleSession) {
	token = storage.NewSecret()
	sess = &consoleSession{csrf: storage.NewSecret(), expires: now.Add(ttl), who: who}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sessions) >= consoleMaxSessions {
		var oldest [32]byte
		first := true
		for k, v := range s.sessions {
			if !now.Before(v.expires) {
				delete(s.sessions, k)
				continue
			}
			if first || v.expires.Before(s.sessions[oldest].expires) {
				oldest, first = k, false
			}
		}
		if len(s.sessions) >= consoleMaxSessions {
			delete(s.sessions, oldest)
		}
	}
	s.sessions[sha256.Sum256([]byte(token))] = sess
	return token, sess
}

// get returns the live session of token, or nil.
func (s *consoleSessions) get(token string, now time.Time) *consoleSession {
	if token == "" {
		return nil
	}
	k := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.sessions[k]
	if sess != nil && !now.Before(sess.expires) {
		delete(s.sessions, k)
		return nil
	}
	return sess
}

// end forgets the session of token, if any.
func (s *consoleSessions) end(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sha256.Sum256([]byte(token)))
}

// stash keeps a new secret in the session for the page that shows it,
// once: the form answers with a redirect to that page, so a reload of it
// shows nothing rather than rotating again.
func (s *consoleSessions) stash(sess *consoleSession, d secretData) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess.secret = &d
}

// take returns the stashed secret and forgets it.
func (s *consoleSessions) take(sess *consoleSession) *secretData {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := sess.secret
	sess.secret = nil
	return d
}

// newLink makes a one-time sign-in token, valid until used or until ttl.
func (s *consoleSessions) newLink(now time.Time, ttl time.Duration) string {
	token := storage.NewSecret()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.links {
		if !now.Before(exp) {
			delete(s.links, k)
		}
	}
	s.links[sha256.Sum256([]byte(token))] = now.Add(ttl)
	return token
}

// linkLive reports whether a one-time token is live, without spending it.
func (s *consoleSessions) linkLive(token string, now time.Time) bool {
	k := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.links[k]
	return ok && now.Before(exp)
}

// useLink spends a one-time token; it reports whether it was live.
func (s *consoleSessions) useLink(token string, now time.Time) bool {
	k := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.links[k]
	delete(s.links, k)
	return ok && now.Before(exp)
}

// ConsoleSignInURL returns a one-time link that signs its first visitor in
// to the console, for the sandbox to print. It stays valid for an hour (or
// admin.console_session_ttl, when shorter), or until used.
func (a *App) ConsoleSignInURL() string {
	return a.AdminURL() + "/console/sign-in/" + a.console.newLink(a.sessionNow(), min(consoleLinkTTL, a.cfg.Admin.ConsoleSessionTTL))
}

// consolePublic serves a page that needs no session.
func (a *App) consolePublic(h consoleHandler) echo.HandlerFunc {
	return func(c echo.Context) error {
		consoleHeaders(c.Response().Header())
		cc := &consoleContext{Context: c, a: a}
		if c.Request().Method == http.MethodPost && !sameOrigin(c.Request()) {
			return cc.fail(errForbidden("The form came from another site."))
		}
		if err := h(cc); err != nil {
			return cc.fail(err)
		}
		return nil
	}
}

// consolePage serves a page that needs a session and permission p: without
// a session (or with one whose key was revoked since), a GET is sent to
// sign-in and anything else refused; a POST must also come from the
// console itself and carry the session's CSRF token; then the session's
// key is authorized for p as the operator API authorizes its keys
// (authorize).
func (a *App) consolePage(p permission, h consoleHandler) echo.HandlerFunc {
	return func(c echo.Context) error {
		consoleHeaders(c.Response().Header())
		cc := &consoleContext{Context: c, a: a}
		if ck, err := c.Cookie(consoleCookie); err == nil {
			cc.session = a.console.get(ck.Value, a.sessionNow())
			live, err := a.sessionLive(c.Request().Context(), cc.session)
			if err != nil {
				return cc.fail(err)
			}
			if !live {
				a.console.end(ck.Value)
				cc.session = nil
			}
		}
		if cc.session == nil {
			if c.Request().Method == http.MethodGet {
				return c.Redirect(http.StatusSeeOther, "/console/sign-in")
			}
			return cc.fail(errUnauthorized("Sign in to the console first."))
		}
		if c.Request().Method == http.MethodPost {
			if !sameOrigin(c.Request()) {
				return cc.fail(errForbidden("The form came from another site."))
			}
			if err := cc.parseForm(); err != nil {
				return cc.fail(err)
			}
			if err := checkCSRF(c.Request(), cc.session); err != nil {
				return cc.fail(err)
			}
		}
		if err := a.authorize(c, cc.session.who, p); err != nil {
			return cc.fail(err)
		}
		c.SetRequest(c.Request().WithContext(withIdentity(c.Request().Context(), cc.session.who)))
		if err := h(cc); err != nil {
			return cc.fail(err)
		}
		return nil
	}
}

// checkCSRF refuses a parsed form whose csrf field is not the session's
// token, comparing in constant time.
func checkCSRF(r *http.Request, sess *consoleSession) error {
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(sess.csrf)) != 1 {
		return errForbidden("The form's CSRF token is missing or wrong: reload the page and try again.")
	}
	return nil
}

// sameOrigin refuses a request a browser says came from another site:
// by Sec-Fetch-Site when the browser sends it, else by Origin. Under
// Referrer-Policy: no-referrer a browser sends "Origin: null" with a form
// of the same origin, so null proves nothing either way. A request
// without the headers (an old browser, a script) passes: the CSRF token
// still stands in its way.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	if origin := r.Header.Get("Origin"); origin != "" && origin != "null" {
		u, err := url.Parse(origin)
		return err == nil && u.Host == r.Host
	}
	return true
}

// signInPage is the sign-in form; a browser signed in already goes to the
// overview.
func (a *App) signInPage(cc *consoleContext) error {
	if ck, err := cc.Cookie(consoleCookie); err == nil && a.console.get(ck.Value, a.sessionNow()) != nil {
		return cc.Redirect(http.StatusSeeOther, "/console/")
	}
	return cc.render(http.StatusOK, "signin", consoleView{Title: "Sign in"})
}

// signIn checks the operator key the form carries (identify: admin.api_key
// or a stored key), within the key failure limit (checkOperatorKey), and
// signs the browser in as that key. An empty key guesses nothing and is
// not counted.
func (a *App) signIn(cc *consoleContext) error {
	if err := cc.parseForm(); err != nil {
		return err
	}
	key := cc.Request().PostForm.Get("key")
	wrong := errUnauthorized("That is not the operator API key or a valid operator key.")
	if key == "" {
		return a.signInFailed(cc, wrong)
	}
	who, err := a.identify(cc.Request().Context(), key)
	if err != nil {
		return err
	}
	if err := a.checkOperatorKey(cc, who != nil, wrong); err != nil {
		return a.signInFailed(cc, err)
	}
	return a.startSession(cc, who)
}

// sessionLive reports whether a session's key still works: admin.api_key
// always does (a restart, which a new key needs, ends every session); a
// stored key is read again, so that its revocation holds at once.
func (a *App) sessionLive(ctx context.Context, sess *consoleSession) (bool, error) {
	if sess == nil {
		return false, nil
	}
	if sess.who.KeyID == "" {
		return true, nil
	}
	k, err := a.store.GetOperatorKey(ctx, sess.who.KeyID)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return !k.Revoked(), nil
}

// signInFailed answers a refused sign-in with the sign-in page and the
// error's status (401, or 429 when the key failure limit is reached).
func (a *App) signInFailed(cc *consoleContext, e *Error) error {
	return cc.render(e.Status, "signin", consoleView{Title: "Sign in", Error: e})
}

// signInLink spends a one-time link and signs its visitor in. It answers
// with the overview itself rather than a redirect: a SameSite=Strict
// cookie is not sent on the redirect that follows a click from another
// site, and the link would be spent for nothing. A wrong link counts
// against the key failure limit as a wrong key does; a live one from a
// limited address is refused without being spent.
func (a *App) signInLink(cc *consoleContext) error {
	wrong := errUnauthorized("This sign-in link has been used or has expired: sign in with the operator API key.")
	if cc.Request().Method != http.MethodGet {
		return a.signInFailed(cc, wrong) // a HEAD neither spends nor checks the link
	}
	token, now := cc.Param("token"), a.sessionNow()
	if err := a.checkOperatorKey(cc, a.console.linkLive(token, now), wrong); err != nil {
		return a.signInFailed(cc, err)
	}
	if !a.console.useLink(token, now) {
		return a.signInFailed(cc, wrong) // spent by a concurrent request since
	}
	cc.session = a.newSession(cc, configIdentity)
	cc.SetRequest(cc.Request().WithContext(withIdentity(cc.Request().Context(), configIdentity)))
	return a.overviewPage(cc)
}

// startSession signs the browser in as who, ending the session its cookie
// named before, if any.
func (a *App) startSession(cc *consoleContext, who *operatorIdentity) error {
	a.newSession(cc, who)
	return cc.Redirect(http.StatusSeeOther, "/console/")
}

// newSession opens a session of who, sets its cookie and returns it.
func (a *App) newSession(cc *consoleContext, who *operatorIdentity) *consoleSession {
	if ck, err := cc.Cookie(consoleCookie); err == nil {
		a.console.end(ck.Value)
	}
	token, sess := a.console.start(a.sessionNow(), a.cfg.Admin.ConsoleSessionTTL, who)
	cc.SetCookie(a.sessionCookie(cc.Request(), token, int(a.cfg.Admin.ConsoleSessionTTL/time.Second)))
	return sess
}

// sessionCookie is the console's cookie: HttpOnly, SameSite=Strict, and
// Secure when the browser reached the console over TLS: directly, through
// a proxy that says so (X-Forwarded-Proto, first value), or at an https
// admin.public_url.
func (a *App) sessionCookie(r *http.Request, value string, maxAge int) *http.Cookie {
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	secure := r.TLS != nil || strings.EqualFold(strings.TrimSpace(proto), "https") ||
		strings.HasPrefix(strings.ToLower(a.cfg.Admin.PublicURL), "https://")
	return &http.Cookie{Name: consoleCookie, Value: value, Path: "/console", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure}
}

// signOut ends the session and the cookie. A live session's sign-out must
// carry its CSRF token; without a live one there is nothing to protect,
// and the stale cookie is cleared.
func (a *App) signOut(cc *consoleContext) error {
	if ck, err := cc.Cookie(consoleCookie); err == nil {
		if sess := a.console.get(ck.Value, a.sessionNow()); sess != nil {
			if err := cc.parseForm(); err != nil {
				return err
			}
			if err := checkCSRF(cc.Request(), sess); err != nil {
				return err
			}
		}
		a.console.end(ck.Value)
	}
	cc.SetCookie(a.sessionCookie(cc.Request(), "", -1))
	return cc.Redirect(http.StatusSeeOther, "/console/sign-in")
}
