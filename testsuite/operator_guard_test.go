package testsuite_test

import (
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// TestOperatorHostAllowlist: the operator listener answers a Host that is
// an IP address or localhost (any port) and a name of admin.allowed_hosts;
// a name a web page could rebind to it gets 421, in the envelope on the
// operator API and as the console's page under /console/. The partner
// listener answers any Host.
func TestOperatorHostAllowlist(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t, testsuite.WithConfig(func(c *config.Config) {
		c.Admin.AllowedHosts = []string{"rxgate-admin.internal"}
	}))
	u, err := url.Parse(env.AdminURL)
	require.NoError(t, err)
	port := u.Port()
	tests := []struct {
		name string
		host string
		ok   bool
	}{
		{name: "the listener's own address", host: u.Host, ok: true},
		{name: "IPv4 without port", host: "127.0.0.1", ok: true},
		{name: "IPv6 with port", host: "[::1]:" + port, ok: true},
		{name: "localhost", host: "localhost:" + port, ok: true},
		{name: "allowed_hosts entry", host: "rxgate-admin.internal:" + port, ok: true},
		{name: "rebinding name", host: "attacker.example:" + port},
		{name: "rebinding name that resolves to loopback", host: "127.0.0.1.nip.io:" + port},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, path := range []string{"/healthz", "/admin/v1/partners", "/admin/v1/openapi.json"} {
				r := env.Do(t, testsuite.Request{URL: env.AdminPath(path), Token: env.AdminKey, Host: tt.host})
				if tt.ok {
					assert.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
					continue
				}
				assert.Equal(t, http.StatusMisdirectedRequest, r.Status, "%s: %s", path, r.Body)
				assert.Equal(t, "misdirected-request", r.Slug(), path)
				env.CheckEnvelope(t, r)
			}

			page := consoleWithHost(t, env, "/console/sign-in", tt.host)
			assert.Contains(t, page.header.Get("Content-Type"), "text/html")
			if tt.ok {
				assert.Equal(t, http.StatusOK, page.status)
			} else {
				assert.Equal(t, http.StatusMisdirectedRequest, page.status)
				assert.Contains(t, page.body, "Misdirected request")
			}

			r := env.Do(t, testsuite.Request{URL: env.PartnerURL + "/healthz", Host: tt.host})
			assert.Equal(t, http.StatusOK, r.Status, "the partner listener answers any Host")
		})
	}
}

// consoleWithHost gets a console page with the Host header host.
func consoleWithHost(t testing.TB, env *testsuite.Env, path, host string) page {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, env.AdminURL+path, nil)
	require.NoError(t, err)
	req.Host = host
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return page{status: res.StatusCode, header: res.Header, body: string(b)}
}

// TestOperatorKeyGuessing: over HTTP, from the test's own address, after
// admin.key_failure_burst wrong keys every attempt is 429 with
// Retry-After, with the right key too and at the console's sign-in too,
// until admin.key_failure_interval has passed; then one more attempt is
// let through.
func TestOperatorKeyGuessing(t *testing.T) {
	t.Parallel()
	clock := fake.NewClock(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	env := testsuite.Start(t, testsuite.WithNow(clock.Now), testsuite.WithConfig(func(c *config.Config) {
		c.Admin.KeyFailureBurst, c.Admin.KeyFailureInterval = 3, 10*time.Second
	}))
	wrong := "wrong-" + env.AdminKey
	send := func(path, key string) *testsuite.Response {
		t.Helper()
		r := env.Do(t, testsuite.Request{URL: env.AdminPath(path), Token: key})
		env.CheckEnvelope(t, r)
		return r
	}
	limited := func(r *testsuite.Response, why string) {
		t.Helper()
		require.Equal(t, http.StatusTooManyRequests, r.Status, "%s: %s", why, r.Body)
		assert.Equal(t, "too-many-requests", r.Slug(), why)
		assert.Equal(t, "10", r.Header.Get("Retry-After"), why)
		assert.NotContains(t, string(r.Body), env.AdminKey, why)
	}

	for i := range 3 {
		r := send("/admin/v1/overview", wrong)
		require.Equal(t, http.StatusUnauthorized, r.Status, "guess %d", i+1)
		assert.Empty(t, r.Header.Get("Retry-After"))
	}
	limited(send("/admin/v1/overview", wrong), "the guess after the burst")
	limited(send("/admin/v1/overview", env.AdminKey), "the right key while limited")
	limited(send("/metrics", wrong), "metrics")
	c := newConsole(t, env)
	p := c.post("/console/sign-in", url.Values{"key": {env.AdminKey}})
	assert.Equal(t, http.StatusTooManyRequests, p.status, "the console's sign-in shares the address's limit")
	assert.Contains(t, p.body, "Too many wrong operator keys")
	assert.Empty(t, p.header.Values("Set-Cookie"))

	clock.Advance(10 * time.Second)
	assert.Equal(t, http.StatusOK, send("/admin/v1/overview", env.AdminKey).Status, "a token back: the right key")
	p = c.post("/console/sign-in", url.Values{"key": {env.AdminKey}})
	assert.Equal(t, http.StatusSeeOther, p.status, "the right key takes no token")
	assert.Equal(t, http.StatusUnauthorized, send("/admin/v1/overview", wrong).Status, "one guess per interval")
	limited(send("/admin/v1/overview", wrong), "and limited again")
}
