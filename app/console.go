package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// The web console at /console/ on the operator listener: HTML rendered on
// the server, usable without JavaScript (it has none), with no resource
// from another origin. An operator signs in with the admin key (a form, or
// a one-time link the sandbox prints) and gets a session cookie; every
// state-changing form carries the session's CSRF token. Every page calls
// the operator API's own operations (findEvents, registerEndpoint,
// replay, ...): the console has no path of its own to the store.
//
// Sessions live in this process's memory: a restart signs everyone out,
// and behind several replicas the console needs sticky sessions (or one
// replica's operator listener). The key is checked as the operator API
// checks it, in constant time, and never reaches a page, a URL or a log.

//go:embed console
var consoleFiles embed.FS

const (
	consoleCookie = "rxgate_console"
	// consoleMaxSessions bounds the sessions kept; signing in beyond it
	// ends the session closest to expiry.
	consoleMaxSessions = 1024
	// consoleMaxForm bounds a console form's body.
	consoleMaxForm = 16 << 10
)

// consoleCSP allows the console's own stylesheet and forms, and nothing
// else: no script at all, no frame, no other origin.
const consoleCSP = "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

var consoleTemplates = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"time": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
		"timep": func(t *time.Time) string {
			if t == nil {
				return "never"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"add":     func(a, b int) int { return a + b },
		"seconds": func(s float64) string { return (time.Duration(s*10) * time.Second / 10).String() },
	}
	pages, err := fs.Glob(consoleFiles, "console/*.html")
	if err != nil {
		panic(err)
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "console/"), ".html")
		if name == "layout" {
			continue
		}
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(consoleFiles, "console/layout.html", p))
	}
	return out
}()

// consoleSessions are the signed-in operators and the unused one-time
// sign-in links, by the SHA-256 of their tokens.
type consoleSessions struct {
	mu       sync.Mutex
	sessions map[[32]byte]*consoleSession
	links    map[[32]byte]time.Time // expiry
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

type consoleSession struct {
	csrf    string
	expires time.Time
	secret  *secretData // a new secret waiting to be shown once; guarded by consoleSessions.mu
}

func newConsoleSessions() *consoleSessions {
	return &consoleSessions{sessions: map[[32]byte]*consoleSession{}, links: map[[32]byte]time.Time{}}
}

// start opens a session and returns its token.
func (s *consoleSessions) start(now time.Time, ttl time.Duration) (token string, sess *consoleSession) {
	token = storage.NewSecret()
	sess = &consoleSession{csrf: storage.NewSecret(), expires: now.Add(ttl)}
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

func (s *consoleSessions) end(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sha256.Sum256([]byte(token)))
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

// useLink spends a one-time token; it reports whether it was live.
func (s *consoleSessions) useLink(token string, now time.Time) bool {
	k := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.links[k]
	delete(s.links, k)
	return ok && now.Before(exp)
}

// consoleLinkTTL bounds a one-time sign-in link's life (and
// admin.console_session_ttl, when shorter, does).
const consoleLinkTTL = time.Hour

// ConsoleSignInURL returns a one-time link that signs its first visitor in
// to the console, for the sandbox to print. It stays valid for an hour (or
// admin.console_session_ttl, when shorter), or until used.
func (a *App) ConsoleSignInURL() string {
	return a.AdminURL() + "/console/sign-in/" + a.console.newLink(a.now(), min(consoleLinkTTL, a.cfg.Admin.ConsoleSessionTTL))
}

// consoleContext is a console request: Echo's context, the session (nil on
// the public pages) and the page's nav section.
type consoleContext struct {
	echo.Context
	a       *App
	session *consoleSession
}

type consoleHandler func(*consoleContext) error

// consoleView is what every page template gets.
type consoleView struct {
	Title   string
	Section string // the nav entry to mark
	CSRF    string // empty on public pages, which show no nav
	Notice  string
	Error   *Error
	Data    any
}

func consoleHeaders(h http.Header) {
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
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

// consolePage serves a page that needs a session: without one, a GET is
// sent to sign-in and anything else refused; a POST must also come from
// the console itself and carry the session's CSRF token.
func (a *App) consolePage(h consoleHandler) echo.HandlerFunc {
	return func(c echo.Context) error {
		consoleHeaders(c.Response().Header())
		cc := &consoleContext{Context: c, a: a}
		if ck, err := c.Cookie(consoleCookie); err == nil {
			cc.session = a.console.get(ck.Value, a.now())
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
			token := c.Request().PostForm.Get("csrf")
			if subtle.ConstantTimeCompare([]byte(token), []byte(cc.session.csrf)) != 1 {
				return cc.fail(errForbidden("The form's CSRF token is missing or wrong: reload the page and try again."))
			}
		}
		if err := h(cc); err != nil {
			return cc.fail(err)
		}
		return nil
	}
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

// parseForm reads an urlencoded form of at most consoleMaxForm bytes.
func (cc *consoleContext) parseForm() error {
	r := cc.Request()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return errBadRequest("Send the form as application/x-www-form-urlencoded.")
	}
	r.Body = http.MaxBytesReader(cc.Response(), r.Body, consoleMaxForm)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge.withCause(err)
		}
		return errBadRequest("The form could not be read.").withCause(err)
	}
	return nil
}

// query parses the page's query as the operator API does (parseQuery): a
// pair it cannot read is a 400, not a parameter quietly dropped.
func (cc *consoleContext) query() (url.Values, error) {
	return parseQuery(cc.Request().URL.RawQuery)
}

// render writes the page with status.
func (cc *consoleContext) render(status int, page string, v consoleView) error {
	if cc.session != nil {
		v.CSRF = cc.session.csrf
	}
	var buf bytes.Buffer
	if err := consoleTemplates[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		return err
	}
	return cc.HTMLBlob(status, buf.Bytes())
}

// fail renders err as the error page, with the status the operator API
// would answer; a server error's cause goes to the log only.
func (cc *consoleContext) fail(err error) error {
	e := toAPIError(err, http.StatusUnprocessableEntity)
	if e.Status >= 500 {
		cc.a.log.Error("console request failed", "requestId", requestID(cc), "route", cc.Path(), "error", e.cause)
	}
	return cc.render(e.Status, "error", consoleView{Title: e.Title, Error: e})
}

// consoleStatic serves the console's stylesheet and icon.
func consoleStatic(name, contentType string) echo.HandlerFunc {
	return func(c echo.Context) error {
		b, err := consoleFiles.ReadFile("console/" + name)
		if err != nil {
			return err
		}
		c.Response().Header().Set("X-Content-Type-Options", "nosniff")
		c.Response().Header().Set("Cache-Control", "no-cache")
		return c.Blob(http.StatusOK, contentType, b)
	}
}

// --- sign-in ---

func (a *App) signInPage(cc *consoleContext) error {
	if ck, err := cc.Cookie(consoleCookie); err == nil && a.console.get(ck.Value, a.now()) != nil {
		return cc.Redirect(http.StatusSeeOther, "/console/")
	}
	return cc.render(http.StatusOK, "signin", consoleView{Title: "Sign in"})
}

func (a *App) signIn(cc *consoleContext) error {
	if err := cc.parseForm(); err != nil {
		return err
	}
	key := cc.Request().PostForm.Get("key")
	if a.cfg.Admin.APIKey == "" || !storage.SecretMatches(a.adminKeyHash, key) {
		return cc.render(http.StatusUnauthorized, "signin", consoleView{Title: "Sign in",
			Error: errUnauthorized("That is not the operator API key.")})
	}
	return a.startSession(cc)
}

// signInLink spends a one-time link and signs its visitor in.
// signInLink spends a one-time link and signs its visitor in. It answers
// with the overview itself rather than a redirect: a SameSite=Strict
// cookie is not sent on the redirect that follows a click from another
// site, and the link would be spent for nothing.
func (a *App) signInLink(cc *consoleContext) error {
	if cc.Request().Method != http.MethodGet || !a.console.useLink(cc.Param("token"), a.now()) {
		return cc.render(http.StatusUnauthorized, "signin", consoleView{Title: "Sign in",
			Error: errUnauthorized("This sign-in link has been used or has expired: sign in with the operator API key.")})
	}
	cc.session = a.newSession(cc)
	return a.overviewPage(cc)
}

// startSession signs the browser in, ending the session its cookie named
// before, if any.
func (a *App) startSession(cc *consoleContext) error {
	a.newSession(cc)
	return cc.Redirect(http.StatusSeeOther, "/console/")
}

// newSession opens a session, sets its cookie and returns it.
func (a *App) newSession(cc *consoleContext) *consoleSession {
	if ck, err := cc.Cookie(consoleCookie); err == nil {
		a.console.end(ck.Value)
	}
	token, sess := a.console.start(a.now(), a.cfg.Admin.ConsoleSessionTTL)
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
		if sess := a.console.get(ck.Value, a.now()); sess != nil {
			if err := cc.parseForm(); err != nil {
				return err
			}
			if subtle.ConstantTimeCompare([]byte(cc.Request().PostForm.Get("csrf")), []byte(sess.csrf)) != 1 {
				return errForbidden("The form's CSRF token is missing or wrong: reload the page and try again.")
			}
		}
		a.console.end(ck.Value)
	}
	cc.SetCookie(a.sessionCookie(cc.Request(), "", -1))
	return cc.Redirect(http.StatusSeeOther, "/console/sign-in")
}

// --- pages ---

func (a *App) overviewPage(cc *consoleContext) error {
	v, err := a.overview(cc.Request().Context())
	if err != nil {
		return err
	}
	return cc.render(http.StatusOK, "overview", consoleView{Title: "Overview", Section: "overview", Data: v})
}

func (a *App) organizationsPage(cc *consoleContext) error {
	orgs, err := a.findOrganizations(cc.Request().Context())
	if err != nil {
		return err
	}
	return cc.render(http.StatusOK, "organizations", consoleView{Title: "Organizations", Section: "organizations", Data: orgs})
}

type organizationData struct {
	Org       OrganizationView
	Users     []UserView
	Page      storage.PageInfo
	NextURL   string
	Endpoints []WebhookEndpointView
}

func (a *App) organizationPage(cc *consoleContext) error {
	ctx := cc.Request().Context()
	org, err := a.findOrganization(ctx, cc.Param("organization_id"))
	if err != nil {
		return err
	}
	q, err := cc.query()
	if err != nil {
		return err
	}
	page, err := pageParams(q, userPageDefault, userPageMax)
	if err != nil {
		return err
	}
	users, info, err := a.findOrganizationUsers(ctx, org.OrganizationID, page)
	if err != nil {
		return err
	}
	endpoints, err := a.findEndpoints(ctx, org.PartnerID)
	if err != nil {
		return err
	}
	d := organizationData{Org: org, Users: users, Page: info, Endpoints: endpoints}
	if info.HasNext {
		next := url.Values{"lastKey": {info.LastKey}}
		if v := q.Get("limit"); v != "" {
			next.Set("limit", v)
		}
		d.NextURL = "?" + next.Encode()
	}
	return cc.render(http.StatusOK, "organization", consoleView{Title: org.Name, Section: "organizations", Data: d})
}

type endpointsData struct {
	Endpoints []WebhookEndpointView
	Partners  []PartnerView
	PartnerOf map[string]string // partner id -> name
	// Form is the registration being corrected.
	Form WebhookEndpointCreateRequest
}

func (a *App) endpointsData(ctx context.Context) (endpointsData, error) {
	endpoints, err := a.findEndpoints(ctx, "")
	if err != nil {
		return endpointsData{}, err
	}
	partners, err := a.findPartners(ctx)
	if err != nil {
		return endpointsData{}, err
	}
	d := endpointsData{Endpoints: endpoints, Partners: partners, PartnerOf: map[string]string{}}
	for _, p := range partners {
		d.PartnerOf[p.PartnerID] = p.Name
	}
	return d, nil
}

var consoleNotices = map[string]string{
	"deleted":  "The endpoint was deleted.",
	"replayed": "A new round of deliveries is queued.",
}

func (a *App) endpointsPage(cc *consoleContext) error {
	d, err := a.endpointsData(cc.Request().Context())
	if err != nil {
		return err
	}
	return cc.render(http.StatusOK, "endpoints", consoleView{Title: "Webhook endpoints", Section: "endpoints",
		Notice: consoleNotices[cc.QueryParam("notice")], Data: d})
}

// secretData is the page that shows a new secret, once.
type secretData struct {
	Endpoint WebhookEndpointView
	Rotated  bool
}

func (a *App) registerEndpointForm(cc *consoleContext) error {
	form := cc.Request().PostForm
	req := a.newEndpointRequest()
	req.PartnerID, req.URL = strings.TrimSpace(form.Get("partner_id")), strings.TrimSpace(form.Get("url"))
	err := checkRequest(req, nil)
	var v WebhookEndpointView
	if err == nil {
		v, err = a.registerEndpoint(cc.Request().Context(), req)
	}
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.Status < 500 {
		d, derr := a.endpointsData(cc.Request().Context())
		if derr != nil {
			return derr
		}
		d.Form = *req
		return cc.render(apiErr.Status, "endpoints", consoleView{Title: "Webhook endpoints", Section: "endpoints", Error: apiErr, Data: d})
	}
	if err != nil {
		return err
	}
	a.console.stash(cc.session, secretData{Endpoint: v})
	return cc.Redirect(http.StatusSeeOther, "/console/endpoints/secret")
}

func (a *App) rotateEndpointForm(cc *consoleContext) error {
	v, err := a.rotateEndpointSecret(cc.Request().Context(), cc.Param("endpoint_id"))
	if err != nil {
		return err
	}
	a.console.stash(cc.session, secretData{Endpoint: v, Rotated: true})
	return cc.Redirect(http.StatusSeeOther, "/console/endpoints/secret")
}

// secretPage shows the secret the last form made, once; a reload finds
// none.
func (a *App) secretPage(cc *consoleContext) error {
	if cc.Request().Method == http.MethodHead {
		return cc.NoContent(http.StatusOK) // a HEAD does not spend the secret's one showing
	}
	d := a.console.take(cc.session)
	if d == nil {
		return cc.render(http.StatusOK, "secret", consoleView{Title: "Secret shown already", Section: "endpoints"})
	}
	title := "Endpoint registered"
	if d.Rotated {
		title = "Secret rotated"
	}
	return cc.render(http.StatusOK, "secret", consoleView{Title: title, Section: "endpoints", Data: *d})
}

func (a *App) deleteEndpointPage(cc *consoleContext) error {
	v, err := a.findEndpoint(cc.Request().Context(), cc.Param("endpoint_id"))
	if err != nil {
		return err
	}
	return cc.render(http.StatusOK, "delete", consoleView{Title: "Delete endpoint", Section: "endpoints", Data: v})
}

func (a *App) deleteEndpointForm(cc *consoleContext) error {
	if err := a.removeEndpoint(cc.Request().Context(), cc.Param("endpoint_id")); err != nil {
		return err
	}
	return cc.Redirect(http.StatusSeeOther, "/console/endpoints?notice=deleted")
}

type eventsData struct {
	Events        []EventView
	Page          storage.PageInfo
	NextURL       string
	Organizations []OrganizationView
	OrgName       map[string]string
	Statuses      []string
	// The filters shown.
	OrganizationID, Status string
}

func (a *App) eventsPage(cc *consoleContext) error {
	ctx := cc.Request().Context()
	q, err := cc.query()
	if err != nil {
		return err
	}
	f, page, err := eventListParams(q)
	if err != nil {
		return err
	}
	events, info, err := a.findEvents(ctx, f, page)
	if err != nil {
		return err
	}
	orgs, err := a.findOrganizations(ctx)
	if err != nil {
		return err
	}
	d := eventsData{Events: events, Page: info, Organizations: orgs, OrgName: map[string]string{}, Statuses: storage.EventStatuses,
		OrganizationID: f.OrganizationID, Status: f.Status}
	for _, o := range orgs {
		d.OrgName[o.OrganizationID] = o.Name
	}
	if info.HasNext {
		next := url.Values{"lastKey": {info.LastKey}}
		for _, k := range []string{"organization_id", "status", "limit"} {
			if v := q.Get(k); v != "" {
				next.Set(k, v)
			}
		}
		d.NextURL = "?" + next.Encode()
	}
	return cc.render(http.StatusOK, "events", consoleView{Title: "Events", Section: "events", Data: d})
}

type eventData struct {
	Event   EventView
	Payload string // pretty-printed
	// Blocked says why the event cannot be replayed now; "" when it can.
	Blocked string
}

func (a *App) eventPage(cc *consoleContext) error {
	v, err := a.findEvent(cc.Request().Context(), cc.Param("event_id"))
	if err != nil {
		return err
	}
	return a.renderEvent(cc, http.StatusOK, v, consoleNotices[cc.QueryParam("notice")], nil)
}

func (a *App) renderEvent(cc *consoleContext, status int, v EventView, notice string, pageErr *Error) error {
	d := eventData{Event: v}
	var pretty bytes.Buffer
	if json.Indent(&pretty, v.Payload, "", "  ") == nil {
		d.Payload = pretty.String()
	} else {
		d.Payload = string(v.Payload)
	}
	if err := a.replayBlocked(cc.Request().Context(), v); err != nil {
		var apiErr *Error
		if !errors.As(err, &apiErr) || apiErr.Status >= 500 {
			return err
		}
		d.Blocked = apiErr.Detail
	}
	return cc.render(status, "event", consoleView{Title: "Event " + v.EventID, Section: "events", Notice: notice, Error: pageErr, Data: d})
}

func (a *App) replayForm(cc *consoleContext) error {
	ctx, id := cc.Request().Context(), cc.Param("event_id")
	v, err := a.replay(ctx, id)
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict {
		current, ferr := a.findEvent(ctx, id)
		if ferr != nil {
			return ferr
		}
		return a.renderEvent(cc, apiErr.Status, current, "", apiErr)
	}
	if err != nil {
		return err
	}
	return cc.Redirect(http.StatusSeeOther, "/console/events/"+url.PathEscape(v.EventID)+"?notice=replayed")
}

// consoleError renders an error the console's handlers did not (a wrong
// method, a body over http.max_body_bytes, a panic) as the console's
// error page, with its headers.
func (a *App) consoleError(c echo.Context, err error) {
	consoleHeaders(c.Response().Header())
	cc := &consoleContext{Context: c, a: a}
	if ferr := cc.fail(err); ferr != nil {
		a.log.Error("rendering the console's error page failed", "requestId", requestID(c), "error", ferr)
		_ = c.String(toAPIError(err, http.StatusUnprocessableEntity).Status, "Error")
	}
}

// isConsole reports whether c is a request for the console's pages.
func (a *App) isConsole(c echo.Context) bool {
	p := c.Request().URL.Path
	return c.Echo() == a.admin && (p == "/console" || strings.HasPrefix(p, "/console/"))
}
