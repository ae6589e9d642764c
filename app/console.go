package app

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// The web console at /console/ on the operator listener: HTML rendered on
// the server, usable without JavaScript (it has none), with no resource
// from another origin. An operator signs in with an operator key (a form,
// or a one-time link the sandbox prints, which signs in as admin.api_key)
// and gets a session cookie; every page and form needs its permission of
// the roles matrix (operator_roles.go), as the operator API does; every
// state-changing form carries the session's CSRF token. Every page reads
// its own URL and calls the operator API's own operations (findEvents,
// registerEndpoint, replay, ...) with what it read: the console has no
// path of its own to the store.
//
// Sessions live in this process's memory: a restart signs everyone out,
// and behind several replicas the console needs sticky sessions (or one
// replica's operator listener). The key is checked as the operator API
// checks it, in constant time, and never reaches a page, a URL or a log.
//
// The console's files: this one has the request type, the templates and
// the rendering; console_sessions.go signing in and out, sessions and the
// CSRF check; console_pages.go the pages that read; console_forms.go the
// forms that write. Its routes are in routes.go (consoleRoutes).

//go:embed console
var consoleFiles embed.FS

// consoleCSP allows the console's own stylesheet and forms, and nothing
// else: no script at all, no frame, no other origin.
const consoleCSP = "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// consoleTemplates are the console's pages by name (the file name without
// .html), each parsed with the layout that frames it.
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

// consoleContext is a console request: Echo's context, the App and the
// session (nil on the public pages).
type consoleContext struct {
	echo.Context
	a       *App
	session *consoleSession
}

// consoleHandler serves one console page or form; an error it returns is
// rendered as the error page (fail).
type consoleHandler func(*consoleContext) error

// consoleView is what every page template gets.
type consoleView struct {
	Title   string
	Section string // the nav entry to mark
	CSRF    string // empty on public pages, which show no nav
	Notice  string
	Error   *Error
	Data    any
	// Who is signed in (nil on public pages), and Can the permissions
	// of its role by name (roleMatrix): pages show only what it may use.
	Who *operatorIdentity
	Can map[string]bool
}

// consoleHeaders are on every console answer: its CSP, no framing, no
// referrer, no sniffing, no caching.
func consoleHeaders(h http.Header) {
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
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
		v.Who = cc.session.who
		v.Can = cc.session.who.permissions()
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
