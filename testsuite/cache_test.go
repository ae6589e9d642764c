package testsuite_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/testsuite"
)

// TestNoStoreEveryRoute walks every route both listeners register (the
// partner API, the operator API and the console, from the server's own
// route table, so that a new route cannot be missed) with and without
// credentials, and checks the caching rule of issue 27 (L4): every answer,
// errors included, carries Cache-Control: no-store, except the answers of
// the public, secret-free routes listed here, which keep their own header;
// token routes also carry Pragma: no-cache (RFC 6749 section 5.1).
func TestNoStoreEveryRoute(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	env.RequireInProcess(t)
	tn := env.NewTenant(t)
	owner := tn.Token(t, testsuite.RoleOwner)
	base := strings.TrimRight(env.Config.HTTP.BasePath, "/")

	// public is the Cache-Control each public route answers with ("" none).
	public := map[string]string{
		base + "/v1/openapi.json":     "",
		base + "/docs":                "",
		"/.well-known/jwks.json":      "public, max-age=300",
		"/admin/v1/openapi.json":      "",
		"/console/static/console.css": "no-cache",
		"/console/static/favicon.svg": "no-cache",
	}
	tokenRoutes := map[string]bool{base + "/v1/token": true, "/admin/v1/tokens": true}
	params := map[string]string{
		"organization_id": tn.OrgID,
		"user_id":         tn.UserID(testsuite.RolePrescriber),
		"patient_id":      tn.PatientID,
		"partner_id":      "0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e",
		"drug_id":         "0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e",
		"scid":            "2XKQ7M4P9R1T6V3W8Y",
		"endpoint_id":     "0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e",
		"event_id":        "0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e",
		"token":           "not-a-sign-in-link",
		"key_id":          "0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e",
	}
	// fill turns a route's path into a URL path: its parameters get the
	// tenant's ids (or ids that do not exist), a wildcard a made-up page.
	fill := func(t *testing.T, path string) string {
		t.Helper()
		parts := strings.Split(path, "/")
		for i, p := range parts {
			if name, ok := strings.CutPrefix(p, "{"); ok {
				v, known := params[strings.TrimSuffix(name, "}")]
				require.True(t, known, "%s: the walk has no value for %s; add one to params", path, p)
				parts[i] = v
			} else if p == "*" {
				parts[i] = "no-such-page"
			}
		}
		return strings.Join(parts, "/")
	}
	check := func(t *testing.T, route string, status int, h http.Header) {
		t.Helper()
		want, isPublic := public[route]
		if !isPublic {
			want = "no-store"
		}
		assert.Equal(t, want, h.Get("Cache-Control"), "%s answered %d", route, status)
		if tokenRoutes[route] {
			assert.Equal(t, "no-cache", h.Get("Pragma"), "%s answered %d", route, status)
		}
	}

	partner, admin := env.App.Routes()
	require.NotEmpty(t, partner)
	require.NotEmpty(t, admin)
	// A successful token answer is the one that matters most.
	bodies := map[string]any{
		base + "/v1/token": map[string]any{"grantType": "client_credentials"},
		"/admin/v1/tokens": map[string]any{"organization_id": tn.OrgID, "user_id": tn.UserID(testsuite.RolePrescriber)},
	}
	walk := func(t *testing.T, prefix string, routes []app.Route, creds func(route string) (string, map[string]string)) {
		for _, r := range routes {
			t.Run(r.Method+" "+r.Path, func(t *testing.T) {
				for _, authed := range []bool{false, true} {
					req := testsuite.Request{Method: r.Method, URL: prefix + fill(t, r.Path)}
					if authed {
						req.Token, req.Headers = creds(r.Path)
						req.Body = bodies[r.Path]
					}
					res := env.Do(t, req)
					check(t, r.Path, res.Status, res.Header)
				}
			})
		}
	}
	t.Run("partner", func(t *testing.T) {
		walk(t, env.PartnerURL, partner, func(route string) (string, map[string]string) {
			if tokenRoutes[route] {
				return "", tn.TokenHeaders(testsuite.RolePrescriber)
			}
			// The owner may act for the prescriber, so that the handlers
			// answer with the prescriber's patient data.
			return owner, tn.Headers()
		})
	})
	t.Run("operator", func(t *testing.T) {
		walk(t, env.AdminURL, admin, func(string) (string, map[string]string) { return env.AdminKey, nil })
	})
	t.Run("console", func(t *testing.T) {
		routes := env.App.ConsoleRoutes()
		require.NotEmpty(t, routes)
		for _, r := range routes {
			t.Run(r.Method+" "+r.Path, func(t *testing.T) {
				path := fill(t, r.Path)
				p := newConsole(t, env).do(r.Method, path, formFor(r.Method, ""), nil)
				check(t, r.Path, p.status, p.header)
				// Signed in, with the session's CSRF token on forms.
				c := newConsole(t, env)
				csrf := c.signIn()
				p = c.do(r.Method, path, formFor(r.Method, csrf), nil)
				check(t, r.Path, p.status, p.header)
			})
		}
	})
}

// formFor is the form a console request sends: the CSRF token on a POST,
// nothing otherwise.
func formFor(method, csrf string) url.Values {
	if method != http.MethodPost {
		return nil
	}
	return url.Values{"csrf": {csrf}}
}
