package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
)

const testAdminKey = "test-admin-key-0123456789" // newTestAppWith's

// TestAdminHostAllowlist: the operator listener answers a Host that is an
// IP literal, localhost, admin.public_url's host or a name in
// admin.allowed_hosts, at any port; any other name (one a web page could
// rebind to 127.0.0.1) gets 421 in the envelope, on every route. The
// partner listener answers any Host.
func TestAdminHostAllowlist(t *testing.T) {
	t.Parallel()
	a, _ := newTestAppWith(t, Options{}, func(c *config.Config) {
		c.Admin.PublicURL = "https://ops.example.org:9443"
		c.Admin.AllowedHosts = []string{"rxgate-admin.internal", "Compose_Service."}
	})
	tests := []struct {
		name string
		host string
		ok   bool
	}{
		{name: "IPv4", host: "127.0.0.1", ok: true},
		{name: "IPv4 with port", host: "127.0.0.1:8081", ok: true},
		{name: "IPv4 of another interface, other port", host: "10.1.2.3:9", ok: true},
		{name: "IPv6", host: "[::1]", ok: true},
		{name: "IPv6 with port", host: "[::1]:8081", ok: true},
		{name: "IPv6 with zone and port", host: "[fe80::1%25eth0]:8081", ok: true},
		{name: "localhost", host: "localhost", ok: true},
		{name: "localhost with port, any case", host: "LocalHost:8081", ok: true},
		{name: "localhost fully qualified", host: "localhost.:8081", ok: true},
		{name: "public_url host", host: "ops.example.org", ok: true},
		{name: "public_url host at another port", host: "ops.example.org:8081", ok: true},
		{name: "allowed_hosts entry", host: "rxgate-admin.internal:8081", ok: true},
		{name: "allowed_hosts entry, other case", host: "RXGATE-ADMIN.INTERNAL", ok: true},
		{name: "allowed_hosts entry with a trailing dot", host: "compose_service", ok: true},
		{name: "no Host (HTTP/1.0)", host: "", ok: true},
		{name: "rebinding name", host: "attacker.example:8081"},
		{name: "rebinding name without port", host: "attacker.example"},
		{name: "name that resolves to loopback", host: "127.0.0.1.nip.io:8081"},
		{name: "localhost as a subdomain", host: "localhost.attacker.example:8081"},
		{name: "subdomain of public_url host", host: "evil.ops.example.org"},
		{name: "parent of public_url host", host: "example.org"},
		{name: "allowed name as a suffix", host: "xrxgate-admin.internal"},
	}
	routes := []struct {
		path, key string
		okStatus  int
	}{
		{path: "/healthz", okStatus: http.StatusOK},
		{path: "/admin/v1/partners", key: testAdminKey, okStatus: http.StatusOK},
		{path: "/admin/v1/partners", okStatus: http.StatusUnauthorized},
		{path: "/metrics", key: testAdminKey, okStatus: http.StatusOK},
		{path: "/console/sign-in", okStatus: http.StatusOK},
		{path: "/no-such-route", okStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, route := range routes {
				req := httptest.NewRequest(http.MethodGet, route.path, nil)
				req.Host = tt.host
				if route.key != "" {
					req.Header.Set("Authorization", "Bearer "+route.key)
				}
				rec := httptest.NewRecorder()
				a.AdminHandler().ServeHTTP(rec, req)
				if tt.ok {
					assert.Equal(t, route.okStatus, rec.Code, "%s: %s", route.path, rec.Body)
					continue
				}
				require.Equal(t, http.StatusMisdirectedRequest, rec.Code, "%s: %s", route.path, rec.Body)
				if strings.HasPrefix(route.path, "/console/") {
					assert.Contains(t, rec.Header().Get("Content-Type"), "text/html", "the console's own error page")
					assert.Contains(t, rec.Body.String(), "Misdirected request")
					continue
				}
				env := decodeEnvelope(t, rec.Body.Bytes())
				assert.Equal(t, "https://errors.rxgate.dev/misdirected-request", env.Error.Type, route.path)
				assert.Equal(t, "MISDIRECTED_REQUEST", env.Code)
			}

			req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
			req.Host = tt.host
			rec := httptest.NewRecorder()
			a.PartnerHandler().ServeHTTP(rec, req)
			assert.Equal(t, http.StatusOK, rec.Code, "the partner listener answers any Host")
		})
	}
}

// decodeEnvelope decodes an error envelope's members the guard tests read.
func decodeEnvelope(t testing.TB, body []byte) errorEnvelope {
	t.Helper()
	var env errorEnvelope
	require.NoError(t, json.Unmarshal(body, &env), "%s", body)
	require.False(t, env.Success)
	return env
}
