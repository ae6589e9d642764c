package app

import (
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/app/openapi"
)

// partnerOpenAPI serves the partner API's OpenAPI document at
// GET {base_url}/v1/openapi.json, its servers naming this instance. The
// document is rendered once, at its first request (the listeners are bound
// by then, so the URLs are known); a rendering failure (an embedded
// document that does not parse) answers 500.
func (a *App) partnerOpenAPI() echo.HandlerFunc {
	return serveDocument(a.partnerDoc)
}

// adminOpenAPI serves the operator API's OpenAPI document at
// GET /admin/v1/openapi.json.
func (a *App) adminOpenAPI() echo.HandlerFunc {
	return serveDocument(sync.OnceValues(func() ([]byte, error) { return openapi.Admin(a.AdminURL()) }))
}

func serveDocument(render func() ([]byte, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		doc, err := render()
		if err != nil {
			return err
		}
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, doc)
	}
}

// partnerRoot is the root of the partner listener for base ({base_url}):
// base without its base path, or, when a public_url does not end in it,
// the URL's scheme and host.
func partnerRoot(base, basePath string) string {
	if root, ok := strings.CutSuffix(base, strings.TrimRight(basePath, "/")); ok && basePath != "" {
		return root
	}
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		return u.Scheme + "://" + u.Host
	}
	return base
}

// Route is one route a listener registers: its method and its path in
// OpenAPI template form (/v1/organizations/{organization_id}), the partner
// listener's including http.base_path.
type Route struct {
	Method string
	Path   string
}

// Routes lists the routes the partner and operator listeners register,
// sorted, so that tests can hold them against the OpenAPI documents. The
// console's pages are not API routes and are left out.
func (a *App) Routes() (partner, admin []Route) {
	api := func(path string) bool { return !isConsoleRoute(path) }
	return echoRoutes(a.partner, nil), echoRoutes(a.admin, api)
}

// ConsoleRoutes lists the console's routes on the operator listener, in
// the form and order of Routes (a wildcard stays "*"), so that tests can
// walk them too.
func (a *App) ConsoleRoutes() []Route {
	return echoRoutes(a.admin, isConsoleRoute)
}

// isConsoleRoute reports whether path is one of the console's: HTML for
// people, not part of the API (console.go).
func isConsoleRoute(path string) bool {
	return path == "/console" || strings.HasPrefix(path, "/console/")
}

// echoRoutes lists e's routes whose path keep accepts (nil: every route).
func echoRoutes(e *echo.Echo, keep func(path string) bool) []Route {
	var out []Route
	for _, r := range e.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		if keep != nil && !keep(r.Path) {
			continue
		}
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if name, ok := strings.CutPrefix(p, ":"); ok {
				parts[i] = "{" + name + "}"
			}
		}
		out = append(out, Route{Method: r.Method, Path: strings.Join(parts, "/")})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}
