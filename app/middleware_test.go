package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
)

func TestSafeRequestID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{name: "uuid", id: "0b7c6f0e-3a4e-4d0f-9a43-6f1f0f6c2d11", want: true},
		{name: "letters digits dash underscore dot", id: "Req_1.a-Z", want: true},
		{name: "one character", id: "a", want: true},
		{name: "64 characters", id: strings.Repeat("a", 64), want: true},
		{name: "65 characters", id: strings.Repeat("a", 65)},
		{name: "empty", id: ""},
		{name: "space", id: "req 1"},
		{name: "newline (log injection)", id: "req\nlevel=ERROR"},
		{name: "carriage return", id: "req\r1"},
		{name: "quote", id: `req"1`},
		{name: "slash", id: "req/1"},
		{name: "colon", id: "req:1"},
		{name: "equals", id: "a=b"},
		{name: "non-ASCII letter", id: "réq"},
		{name: "NUL", id: "req\x001"},
		{name: "invalid UTF-8", id: "req\xff"},
		{name: "64 bytes of multi-byte characters", id: strings.Repeat("é", 32)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, safeRequestID(tt.id))
		})
	}
}

func TestBearerToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		header    []string // Authorization values; nil sends none
		wantToken string
		wantOK    bool
	}{
		{name: "bearer", header: []string{"Bearer x"}, wantToken: "x", wantOK: true},
		{name: "scheme is case-insensitive", header: []string{"bearer x"}, wantToken: "x", wantOK: true},
		{name: "upper-case scheme", header: []string{"BEARER x"}, wantToken: "x", wantOK: true},
		{name: "token is trimmed", header: []string{"Bearer  x "}, wantToken: "x", wantOK: true},
		{name: "jwt-like token", header: []string{"Bearer aaa.bbb.ccc"}, wantToken: "aaa.bbb.ccc", wantOK: true},
		{name: "basic", header: []string{"Basic x"}},
		{name: "scheme only", header: []string{"Bearer"}},
		{name: "scheme and space", header: []string{"Bearer "}},
		{name: "scheme and spaces", header: []string{"Bearer    "}},
		{name: "empty", header: []string{""}},
		{name: "absent"},
		{name: "scheme prefix", header: []string{"Bearerx y"}},
		{name: "token without scheme", header: []string{"x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, h := range tt.header {
				r.Header.Add(echo.HeaderAuthorization, h)
			}
			token, ok := bearerToken(r)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.wantToken, token)
		})
	}
}

func TestRequestIDMiddleware(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		incoming string
		keep     bool
	}{
		{name: "safe id is kept", incoming: "req-1", keep: true},
		{name: "missing id is generated"},
		{name: "unsafe id is replaced", incoming: "req 1\nx"},
		{name: "long id is replaced", incoming: strings.Repeat("a", 65)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := &App{}
			e := echo.New()
			var seen string
			e.GET("/", func(c echo.Context) error {
				seen = requestID(c)
				return c.NoContent(http.StatusNoContent)
			}, a.requestIDMiddleware)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.incoming != "" {
				req.Header.Set(headerRequestID, tt.incoming)
			}
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			require.Equal(t, http.StatusNoContent, rec.Code)
			got := rec.Header().Get(headerRequestID)
			assert.Equal(t, seen, got, "header and context agree")
			if tt.keep {
				assert.Equal(t, tt.incoming, got)
				return
			}
			assert.NotEqual(t, tt.incoming, got)
			assert.Len(t, got, 36, "a uuid")
			assert.True(t, safeRequestID(got))
		})
	}
}

// TestNoStoreMiddleware: every answer is Cache-Control: no-store, errors,
// panics, 404 and 405 included, except the cacheable routes', which keep
// whatever their handler sets; token routes also get Pragma: no-cache.
func TestNoStoreMiddleware(t *testing.T) {
	t.Parallel()
	a, _ := newTestApp(t, Options{})
	rule := cacheRule{
		cacheable: map[string]bool{"/public": true, "/plain": true},
		tokens:    map[string]bool{"/token": true},
	}
	e := echo.New()
	e.HTTPErrorHandler = a.errorHandler
	e.Use(a.requestIDMiddleware, noStoreMiddleware(rule), a.recoverMiddleware)
	answer := func(c echo.Context) error {
		switch c.QueryParam("fail") {
		case "error":
			return errBadClient
		case "panic":
			panic("boom")
		}
		return c.JSON(http.StatusOK, map[string]string{"secret": "s"})
	}
	e.GET("/public", func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
		return answer(c)
	})
	e.GET("/plain", answer)
	e.GET("/data", answer)
	e.POST("/token", answer)

	tests := []struct {
		name, method, target  string
		wantStatus            int
		wantCache, wantPragma string
	}{
		{name: "cacheable route keeps its header", method: http.MethodGet, target: "/public", wantStatus: http.StatusOK, wantCache: "public, max-age=300"},
		{name: "cacheable route without a header", method: http.MethodGet, target: "/plain", wantStatus: http.StatusOK},
		{name: "cacheable route's error", method: http.MethodGet, target: "/public?fail=error", wantStatus: http.StatusUnauthorized, wantCache: "no-store"},
		{name: "cacheable route's panic", method: http.MethodGet, target: "/plain?fail=panic", wantStatus: http.StatusInternalServerError, wantCache: "no-store"},
		{name: "other route", method: http.MethodGet, target: "/data", wantStatus: http.StatusOK, wantCache: "no-store"},
		{name: "error through the error handler", method: http.MethodGet, target: "/data?fail=error", wantStatus: http.StatusUnauthorized, wantCache: "no-store"},
		{name: "panic", method: http.MethodGet, target: "/data?fail=panic", wantStatus: http.StatusInternalServerError, wantCache: "no-store"},
		{name: "token route", method: http.MethodPost, target: "/token", wantStatus: http.StatusOK, wantCache: "no-store", wantPragma: "no-cache"},
		{name: "token route error", method: http.MethodPost, target: "/token?fail=error", wantStatus: http.StatusUnauthorized, wantCache: "no-store", wantPragma: "no-cache"},
		{name: "unknown path", method: http.MethodGet, target: "/nope", wantStatus: http.StatusNotFound, wantCache: "no-store"},
		{name: "wrong method", method: http.MethodDelete, target: "/data", wantStatus: http.StatusMethodNotAllowed, wantCache: "no-store"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
			assert.Equal(t, tt.wantStatus, rec.Code, rec.Body.String())
			assert.Equal(t, tt.wantCache, rec.Header().Get(echo.HeaderCacheControl))
			assert.Equal(t, tt.wantPragma, rec.Header().Get("Pragma"))
		})
	}
}

// TestCacheRuleNamesRoutes: every route template the rule names is a route
// its listener registers, with the default base path and at the root, so
// that a renamed route cannot silently fall out of the rule.
func TestCacheRuleNamesRoutes(t *testing.T) {
	t.Parallel()
	for _, basePath := range []string{"/external", ""} {
		t.Run("base path "+basePath, func(t *testing.T) {
			t.Parallel()
			a, _ := newTestAppWith(t, Options{}, func(c *config.Config) { c.HTTP.BasePath = basePath })
			for api, e := range map[string]*echo.Echo{apiPartner: a.partner, apiAdmin: a.admin} {
				registered := map[string]bool{}
				for _, r := range e.Routes() {
					registered[r.Path] = true
				}
				rule := a.cacheRuleFor(api)
				for _, set := range []map[string]bool{rule.cacheable, rule.tokens} {
					for route := range set {
						assert.True(t, registered[route], "%s listener: %s is in the cache rule but not a route", api, route)
					}
				}
			}
		})
	}
}
