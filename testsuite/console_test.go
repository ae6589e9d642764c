package testsuite_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/testsuite"
)

// console is a browser-like client of the web console: it keeps cookies
// and does not follow redirects, so that tests see them.
type console struct {
	t    testing.TB
	env  *testsuite.Env
	http *http.Client
}

func newConsole(t testing.TB, env *testsuite.Env) *console {
	if testsuite.BehindReplicas() {
		// docs/scaling.md says so too.
		t.Skip("testsuite: console sessions live in each replica's memory; behind replicas the console needs sticky sessions")
	}
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &console{t: t, env: env, http: &http.Client{
		Jar:           jar,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (c *console) do(method, path string, form url.Values, headers map[string]string) page {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.env.AdminURL+path, body)
	require.NoError(c.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := c.http.Do(req)
	require.NoError(c.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(c.t, err)
	return page{status: res.StatusCode, header: res.Header, body: string(b)}
}

func (c *console) get(path string) page { c.t.Helper(); return c.do(http.MethodGet, path, nil, nil) }

func (c *console) post(path string, form url.Values) page {
	c.t.Helper()
	return c.do(http.MethodPost, path, form, nil)
}

// signIn signs in with the admin key and returns the session's CSRF token.
func (c *console) signIn() string {
	c.t.Helper()
	p := c.post("/console/sign-in", url.Values{"key": {c.env.AdminKey}})
	require.Equal(c.t, http.StatusSeeOther, p.status, p.body)
	return c.csrf(c.get("/console/"))
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (c *console) csrf(p page) string {
	c.t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	require.NotNil(c.t, m, "the page has a CSRF field: %.500s", p.body)
	return m[1]
}

// TestConsoleSession: pages need a session; the sign-in form and its
// cookie; sign-out ends the session; a session expires.
func TestConsoleSession(t *testing.T) {
	t.Parallel()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	env := testsuite.Start(t, testsuite.WithNow(now), testsuite.WithConfig(func(c *config.Config) { c.Admin.ConsoleSessionTTL = time.Hour }))
	env.RequireInProcess(t)
	c := newConsole(t, env)

	for _, path := range []string{"/console/", "/console/organizations", "/console/events", "/console/endpoints", "/console/events/" + testsuite.Unique("x")} {
		p := c.get(path)
		assert.Equal(t, http.StatusSeeOther, p.status, path)
		assert.Equal(t, "/console/sign-in", p.header.Get("Location"), path)
	}
	p := c.post("/console/endpoints", url.Values{"url": {"https://a.example"}})
	assert.Equal(t, http.StatusUnauthorized, p.status, "a form without a session is refused")
	assert.Contains(t, p.header.Get("Content-Type"), "text/html")

	p = c.get("/console/sign-in")
	require.Equal(t, http.StatusOK, p.status)
	assert.Contains(t, p.body, `type="password"`)
	p = c.post("/console/sign-in", url.Values{"key": {"wrong-" + env.AdminKey}})
	assert.Equal(t, http.StatusUnauthorized, p.status)
	assert.Contains(t, p.body, "not the operator API key")
	assert.Empty(t, p.header.Values("Set-Cookie"))
	assert.Equal(t, http.StatusSeeOther, c.get("/console/").status, "still signed out")

	p = c.post("/console/sign-in", url.Values{"key": {env.AdminKey}})
	require.Equal(t, http.StatusSeeOther, p.status)
	assert.Equal(t, "/console/", p.header.Get("Location"))
	cookie := p.header.Get("Set-Cookie")
	for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age=3600"} {
		assert.Contains(t, cookie, attr)
	}
	assert.NotContains(t, cookie, "Secure", "served over plain http")
	assert.NotContains(t, cookie, env.AdminKey)

	p = c.get("/console/")
	require.Equal(t, http.StatusOK, p.status)
	assert.Contains(t, p.body, "<h1>Overview</h1>")
	assert.Equal(t, http.StatusSeeOther, c.get("/console/sign-in").status, "signed in already")

	// Behind a TLS-terminating proxy the cookie is Secure.
	for _, proto := range []string{"https", "https, http"} {
		tls := newConsole(t, env)
		p = tls.do(http.MethodPost, "/console/sign-in", url.Values{"key": {env.AdminKey}}, map[string]string{"X-Forwarded-Proto": proto})
		require.Equal(t, http.StatusSeeOther, p.status)
		assert.Contains(t, p.header.Get("Set-Cookie"), "Secure", "X-Forwarded-Proto: %s", proto)
	}

	// Signing in again ends the browser's previous session.
	again := newConsole(t, env)
	again.signIn()
	admin, err := url.Parse(env.AdminURL + "/console/")
	require.NoError(t, err)
	old := again.http.Jar.Cookies(admin)
	require.Len(t, old, 1)
	again.signIn()
	stale := newConsole(t, env)
	stale.http.Jar.SetCookies(admin, old)
	assert.Equal(t, http.StatusSeeOther, stale.get("/console/").status, "the earlier session is over")
	assert.Equal(t, http.StatusOK, again.get("/console/").status, "the new one works")

	// Signing out without a live session clears the stale cookie.
	p = stale.post("/console/sign-out", url.Values{})
	require.Equal(t, http.StatusSeeOther, p.status)
	assert.Contains(t, p.header.Get("Set-Cookie"), "Max-Age=0")

	// Sign-out needs the CSRF token, then ends the session.
	csrf := c.csrf(c.get("/console/"))
	assert.Equal(t, http.StatusForbidden, c.post("/console/sign-out", url.Values{}).status)
	assert.Equal(t, http.StatusOK, c.get("/console/").status, "a forged sign-out changes nothing")
	p = c.post("/console/sign-out", url.Values{"csrf": {csrf}})
	require.Equal(t, http.StatusSeeOther, p.status)
	assert.Equal(t, "/console/sign-in", p.header.Get("Location"))
	assert.Equal(t, http.StatusSeeOther, c.get("/console/").status, "signed out")

	// A session ends after admin.console_session_ttl.
	c.signIn()
	assert.Equal(t, http.StatusOK, c.get("/console/").status)
	offset.Store(int64(time.Hour + time.Second))
	assert.Equal(t, http.StatusSeeOther, c.get("/console/").status, "expired")

	// A one-time link works once.
	link := newConsole(t, env)
	u, err := url.Parse(env.App.ConsoleSignInURL())
	require.NoError(t, err)
	head := newConsole(t, env).do(http.MethodHead, u.Path, nil, nil)
	assert.Equal(t, http.StatusUnauthorized, head.status, "a HEAD does not spend the link")
	p = link.get(u.Path)
	require.Equal(t, http.StatusOK, p.status, "the link answers with the overview, so no redirect can lose the cookie")
	assert.Contains(t, p.body, "<h1>Overview</h1>")
	assert.Equal(t, http.StatusOK, link.get("/console/").status)
	p = newConsole(t, env).get(u.Path)
	assert.Equal(t, http.StatusUnauthorized, p.status, "used")
	p = newConsole(t, env).get("/console/sign-in/" + strings.Repeat("A", 43))
	assert.Equal(t, http.StatusUnauthorized, p.status, "never issued")
}

// TestConsolePages: every page answers with the console's headers, shows
// what the operator API holds, and never shows the admin key or patient
// demographics.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	registerEndpoint(t, env, tn.PartnerID, "https://pharmacy.example/hooks")
	scid := prescribe(t, env, tn)
	ev := eventOf(t, env, tn, scid)
	eventID := ev["event_id"].(string)
	patient := env.MustAdmin(t, http.MethodGet, tn.PatientPath(), nil, http.StatusOK)

	c := newConsole(t, env)
	c.signIn()
	tests := []struct {
		path string
		want []string
	}{
		{"/console/", []string{"<h1>Overview</h1>", `id="organizations">1<`, `id="users">4<`}},
		{"/console/organizations", []string{tn.OrgName, tn.OrgID}},
		{"/console/organizations/" + tn.OrgID, []string{tn.OrgName, tn.Emails[testsuite.RoleOwner], "https://pharmacy.example/hooks", "no: its events are skipped"}},
		{"/console/endpoints", []string{"https://pharmacy.example/hooks", "Rotate secret"}},
		{"/console/events", []string{eventID, "skipped"}},
		{"/console/events?status=skipped&organization_id=" + tn.OrgID, []string{eventID}},
		{"/console/events/" + eventID, []string{scid, `id="payload"`, "Replay is not possible now: Validate has not succeeded"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			p := c.get(tt.path)
			require.Equal(t, http.StatusOK, p.status, p.body)
			assert.Equal(t, "text/html; charset=UTF-8", p.header.Get("Content-Type"))
			csp := p.header.Get("Content-Security-Policy")
			assert.Contains(t, csp, "default-src 'self'")
			assert.Contains(t, csp, "script-src 'none'")
			assert.Contains(t, csp, "frame-ancestors 'none'")
			assert.Equal(t, "DENY", p.header.Get("X-Frame-Options"))
			assert.Equal(t, "no-referrer", p.header.Get("Referrer-Policy"))
			assert.Equal(t, "no-store", p.header.Get("Cache-Control"))
			for _, w := range tt.want {
				assert.Contains(t, p.body, w)
			}
			assert.NotContains(t, p.body, env.AdminKey)
			for _, member := range []string{"data.given_name", "data.family_name", "data.phone", "data.email", "data.medicare_card_number", "data.date_of_birth"} {
				if v, ok := patient.Get(member); ok && v != "" {
					assert.NotContains(t, p.body, v.(string), "patient %s", member)
				}
			}
			assert.NotContains(t, p.body, "<script")
		})
	}

	for _, tt := range []struct {
		path   string
		status int
		says   string
	}{
		{"/console/events?status=lost", http.StatusBadRequest, "<code>status</code>"},
		{"/console/events?organization_id=nope", http.StatusBadRequest, "<code>organization_id</code>"},
		{"/console/events?limit=0", http.StatusBadRequest, "<code>limit</code>"},
		{"/console/events?lastKey=nope", http.StatusBadRequest, "<code>lastKey</code>"},
		{"/console/events?a;b", http.StatusBadRequest, "not a correctly encoded query parameter"},
		{"/console/organizations/00000000-0000-4000-8000-000000000000", http.StatusNotFound, "does not exist"},
		{"/console/organizations/nope", http.StatusNotFound, "Not found"},
		{"/console/events/00000000-0000-4000-8000-000000000000", http.StatusNotFound, "does not exist"},
		{"/console/nowhere", http.StatusNotFound, "There is no such page."},
	} {
		p := c.get(tt.path)
		assert.Equal(t, tt.status, p.status, tt.path)
		assert.Contains(t, p.header.Get("Content-Type"), "text/html", tt.path)
		assert.Contains(t, p.body, `id="error"`, tt.path)
		assert.Contains(t, p.body, tt.says, tt.path)
	}
	signedOut := newConsole(t, env)
	for _, tt := range []struct {
		c    *console
		path string
	}{{c, "/console/events"}, {signedOut, "/console/sign-in"}, {signedOut, "/console/static/console.css"}} {
		head := tt.c.do(http.MethodHead, tt.path, nil, nil)
		assert.Equal(t, http.StatusOK, head.status, "HEAD %s answers as GET does", tt.path)
	}
	// What the console's handlers never see is still the console's page.
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{http.MethodPost, "/console/", http.StatusMethodNotAllowed},
		{http.MethodDelete, "/console/endpoints", http.StatusMethodNotAllowed},
	} {
		p := c.do(tt.method, tt.path, url.Values{}, nil)
		assert.Equal(t, tt.status, p.status, "%s %s", tt.method, tt.path)
		assert.Contains(t, p.header.Get("Content-Type"), "text/html", "%s %s", tt.method, tt.path)
		assert.Contains(t, p.header.Get("Content-Security-Policy"), "default-src 'self'", "%s %s", tt.method, tt.path)
		assert.Contains(t, p.body, `id="error"`, "%s %s", tt.method, tt.path)
	}
}

// TestConsoleForms: registering, rotating and deleting endpoints and
// replaying events through forms do what the operator API does, and a
// form without the session's CSRF token, or from another site, changes
// nothing.
func TestConsoleForms(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	c := newConsole(t, env)
	csrf := c.signIn()
	endpoints := func() []any {
		t.Helper()
		r := env.MustAdmin(t, http.MethodGet, "/admin/v1/webhook-endpoints?partner_id="+tn.PartnerID, nil, http.StatusOK)
		v, _ := r.Get("data")
		return v.([]any)
	}
	register := url.Values{"partner_id": {tn.PartnerID}, "url": {"https://pharmacy.example/a"}}
	with := func(v url.Values, k, val string) url.Values {
		out := url.Values{}
		for key, vals := range v {
			out[key] = vals
		}
		out.Set(k, val)
		return out
	}

	t.Run("forged", func(t *testing.T) {
		for _, tt := range []struct {
			name    string
			form    url.Values
			headers map[string]string
		}{
			{name: "no token", form: register},
			{name: "wrong token", form: with(register, "csrf", "x"+csrf)},
			{name: "another session's token", form: with(register, "csrf", newConsole(t, env).signIn())},
			{name: "another site", form: with(register, "csrf", csrf), headers: map[string]string{"Origin": "https://evil.example"}},
			{name: "another site, by fetch metadata", form: with(register, "csrf", csrf), headers: map[string]string{"Sec-Fetch-Site": "cross-site"}},
			{name: "a sibling site", form: with(register, "csrf", csrf), headers: map[string]string{"Sec-Fetch-Site": "same-site"}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				p := c.do(http.MethodPost, "/console/endpoints", tt.form, tt.headers)
				assert.Equal(t, http.StatusForbidden, p.status, p.body)
				assert.Empty(t, endpoints(), "nothing was registered")
			})
		}
		p := c.do(http.MethodPost, "/console/sign-in", url.Values{"key": {env.AdminKey}}, map[string]string{"Origin": "https://evil.example"})
		assert.Equal(t, http.StatusForbidden, p.status, "a sign-in form posted from another site")
	})

	secretField := regexp.MustCompile(`id="secret" value="([^"]+)"`)
	// shown follows a form's redirect to the page that shows its secret,
	// and checks that a reload of that page shows it no more.
	shown := func(t *testing.T, p page) string {
		t.Helper()
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		require.Equal(t, "/console/endpoints/secret", p.header.Get("Location"))
		head := c.do(http.MethodHead, "/console/endpoints/secret", nil, nil)
		require.Equal(t, http.StatusOK, head.status)
		page := c.get("/console/endpoints/secret")
		require.Equal(t, http.StatusOK, page.status)
		secret := secretField.FindStringSubmatch(page.body)
		require.NotNil(t, secret, page.body)
		again := c.get("/console/endpoints/secret")
		assert.NotContains(t, again.body, secret[1], "a reload shows the secret no more")
		assert.Contains(t, again.body, `id="shown"`)
		return secret[1]
	}

	t.Run("register, secret shown once", func(t *testing.T) {
		secret := shown(t, c.post("/console/endpoints", with(register, "csrf", csrf)))
		eps := endpoints()
		require.Len(t, eps, 1)
		assert.Len(t, secret, 43, "a new secret")
		list := c.get("/console/endpoints")
		assert.Contains(t, list.body, "https://pharmacy.example/a")
		assert.NotContains(t, list.body, secret, "the secret is shown only once")

		p := c.post("/console/endpoints", with(register, "csrf", csrf))
		assert.Equal(t, http.StatusConflict, p.status, "the same URL twice")
		p = c.post("/console/endpoints", with(with(register, "url", "ftp://pharmacy.example"), "csrf", csrf))
		assert.Equal(t, http.StatusUnprocessableEntity, p.status)
		assert.Contains(t, p.body, "<code>url</code>")
		assert.Contains(t, p.body, `value="ftp://pharmacy.example"`, "the form keeps what was typed")
		p = c.post("/console/endpoints", with(with(register, "partner_id", "00000000-0000-4000-8000-000000000000"), "csrf", csrf))
		assert.Equal(t, http.StatusUnprocessableEntity, p.status)
		assert.Contains(t, p.body, "must name an existing partner")
		assert.Len(t, endpoints(), 1)

		id := eps[0].(map[string]any)["endpoint_id"].(string)
		rotated := shown(t, c.post("/console/endpoints/"+id+"/rotate-secret", url.Values{"csrf": {csrf}}))
		assert.NotEqual(t, secret, rotated)
		r := env.MustAdmin(t, http.MethodGet, "/admin/v1/webhook-endpoints/"+id, nil, http.StatusOK)
		assert.NotEmpty(t, r.String(t, "data.rotated_at"), "rotated through the same operation as the API's")

		confirm := c.get("/console/endpoints/" + id + "/delete")
		require.Equal(t, http.StatusOK, confirm.status)
		assert.Contains(t, confirm.body, "Delete the endpoint")
		assert.Len(t, endpoints(), 1, "asking is not deleting")
		assert.Equal(t, http.StatusForbidden, c.post("/console/endpoints/"+id+"/delete", url.Values{}).status)
		p = c.post("/console/endpoints/"+id+"/delete", url.Values{"csrf": {c.csrf(confirm)}})
		require.Equal(t, http.StatusSeeOther, p.status)
		assert.Equal(t, "/console/endpoints?notice=deleted", p.header.Get("Location"))
		assert.Empty(t, endpoints())
		assert.Equal(t, http.StatusNotFound, c.post("/console/endpoints/"+id+"/delete", url.Values{"csrf": {csrf}}).status)
	})

	t.Run("replay", func(t *testing.T) {
		ev := eventOf(t, env, tn, prescribe(t, env, tn))
		id := ev["event_id"].(string)
		p := c.post("/console/events/"+id+"/replay", url.Values{"csrf": {csrf}})
		assert.Equal(t, http.StatusConflict, p.status, "not validated: refused with the API's reason")
		assert.Contains(t, p.body, "Validate has not succeeded")
		assert.Equal(t, float64(1), eventOf(t, env, tn, ev["payload"].(map[string]any)["data"].(map[string]any)["scid"].(string))["round"])
	})

	t.Run("oversized form", func(t *testing.T) {
		before := len(endpoints())
		p := c.post("/console/endpoints", url.Values{"csrf": {csrf}, "partner_id": {tn.PartnerID}, "url": {"https://pharmacy.example/" + strings.Repeat("a", 20<<10)}})
		assert.Equal(t, http.StatusRequestEntityTooLarge, p.status)
		assert.Len(t, endpoints(), before, "nothing was registered")
	})
}

// TestConsoleEventPaging: the event log pages with the API's cursors, and
// the next page keeps the filters.
func TestConsoleEventPaging(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn, other := env.NewTenant(t), env.NewTenant(t)
	prescribe(t, env, other)
	var ids []string
	for range 23 {
		ids = append(ids, eventOf(t, env, tn, prescribe(t, env, tn))["event_id"].(string))
	}
	c := newConsole(t, env)
	c.signIn()
	next := regexp.MustCompile(`<a rel="next" href="\?([^"]+)" id="next">`)
	path := "/console/events?organization_id=" + tn.OrgID
	var seen []string
	eventLink := regexp.MustCompile(`href="/console/events/([0-9a-f-]{36})"`)
	for pages := 0; path != ""; pages++ {
		require.Less(t, pages, 5, "paging ends")
		p := c.get(path)
		require.Equal(t, http.StatusOK, p.status, p.body)
		for _, m := range eventLink.FindAllStringSubmatch(p.body, -1) {
			seen = append(seen, m[1])
		}
		path = ""
		if m := next.FindStringSubmatch(p.body); m != nil {
			q, err := url.ParseQuery(strings.ReplaceAll(m[1], "&amp;", "&"))
			require.NoError(t, err)
			assert.Equal(t, tn.OrgID, q.Get("organization_id"), "the next page keeps the filter")
			path = "/console/events?" + q.Encode()
		}
	}
	assert.Equal(t, ids, seen, "every event of the organization, oldest first, once, and none of another's")
}
