package testsuite_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

const operatorKeysPath = "/admin/v1/operator-keys"

// operatorKey creates an operator key with the admin key and returns its
// id and the key itself.
func operatorKey(t testing.TB, env *testsuite.Env, role string) (id, key string) {
	t.Helper()
	r := env.MustAdmin(t, http.MethodPost, operatorKeysPath, map[string]any{"name": testsuite.Unique("key-"), "role": role}, http.StatusCreated)
	return r.String(t, "data.key_id"), r.String(t, "data.key")
}

// signInWith signs the console in with key and returns the session's
// CSRF token.
func (c *console) signInWith(key string) string {
	c.t.Helper()
	p := c.post("/console/sign-in", url.Values{"key": {key}})
	require.Equal(c.t, http.StatusSeeOther, p.status, p.body)
	// A partner's home is its events (it may not see the overview).
	return c.csrf(c.get("/console/events"))
}

// The roles of the matrix, as the tables below name them.
const (
	rAdmin    = "admin"
	rOperator = "operator"
	rViewer   = "viewer"
	rPartner  = "partner"
)

var allRoles = []string{rAdmin, rOperator, rViewer, rPartner}

// rolesMatrix is the roles matrix (docs/security.md) as the tests expect
// it: for every route of the operator listener that needs a key, the
// roles that may use it. A route the server has and this table has not
// fails TestRolesEveryRoute: a new route needs its row here, and its
// permission in app/routes.go.
var rolesMatrix = map[string]string{
	"GET /metrics": "admin operator viewer",

	"POST /admin/v1/partners":                                                                                    "admin",
	"GET /admin/v1/partners":                                                                                     "admin operator viewer partner",
	"POST /admin/v1/partners/{partner_id}/rotate-secret":                                                         "admin",
	"POST /admin/v1/organizations":                                                                               "admin",
	"GET /admin/v1/organizations":                                                                                "admin operator viewer partner",
	"GET /admin/v1/organizations/{organization_id}":                                                              "admin operator viewer partner",
	"GET /admin/v1/organizations/{organization_id}/users":                                                        "admin operator partner",
	"POST /admin/v1/organizations/{organization_id}/rotate-secret":                                               "admin",
	"POST /admin/v1/organizations/{organization_id}/users":                                                       "admin",
	"GET /admin/v1/organizations/{organization_id}/users/{user_id}":                                              "admin operator partner",
	"POST /admin/v1/organizations/{organization_id}/users/{user_id}/patients":                                    "admin",
	"GET /admin/v1/organizations/{organization_id}/users/{user_id}/patients/{patient_id}":                        "admin",
	"POST /admin/v1/organizations/{organization_id}/users/{user_id}/patients/{patient_id}/prescriptions":         "admin",
	"PATCH /admin/v1/organizations/{organization_id}/users/{user_id}/patients/{patient_id}/prescriptions/{scid}": "admin",
	"POST /admin/v1/tokens":                                                                                      "admin",
	"POST /admin/v1/webhook-endpoints":                                                                           "admin operator",
	"GET /admin/v1/webhook-endpoints":                                                                            "admin operator viewer partner",
	"GET /admin/v1/webhook-endpoints/{endpoint_id}":                                                              "admin operator viewer partner",
	"POST /admin/v1/sandbox/clock":                                                                               "admin operator",
	"PATCH /admin/v1/webhook-endpoints/{endpoint_id}":                                                            "admin operator",
	"DELETE /admin/v1/webhook-endpoints/{endpoint_id}":                                                           "admin operator",
	"POST /admin/v1/webhook-endpoints/{endpoint_id}/rotate-secret":                                               "admin operator partner",
	"POST /admin/v1/webhook-endpoints/{endpoint_id}/diagnose":                                                    "admin operator partner",
	"POST /admin/v1/webhook-endpoints/{endpoint_id}/test":                                                        "admin operator partner",
	"POST /admin/v1/webhook-endpoints/{endpoint_id}/enable":                                                      "admin operator partner",
	"POST /admin/v1/webhook-endpoints/{endpoint_id}/recover":                                                     "admin operator partner",
	"GET /admin/v1/events":                                                                                       "admin operator viewer partner",
	"GET /admin/v1/events/{event_id}":                                                                            "admin operator viewer partner",
	"POST /admin/v1/events/{event_id}/replay":                                                                    "admin operator partner",
	"GET /admin/v1/backup":                                                                                       "admin",
	"GET /admin/v1/overview":                                                                                     "admin operator viewer",
	"POST /admin/v1/operator-keys":                                                                               "admin",
	"GET /admin/v1/operator-keys":                                                                                "admin",
	"POST /admin/v1/operator-keys/{key_id}/revoke":                                                               "admin",
	"GET /admin/v1/audit":                                                                                        "admin",
	"GET /admin/v1/audit/checkpoints":                                                                            "admin",

	"GET /console/":                                       "admin operator viewer partner",
	"GET /console/organizations":                          "admin operator viewer partner",
	"GET /console/organizations/{organization_id}":        "admin operator viewer partner",
	"GET /console/endpoints":                              "admin operator viewer partner",
	"POST /console/endpoints":                             "admin operator",
	"POST /console/endpoints/{endpoint_id}/rotate-secret": "admin operator partner",
	"GET /console/endpoints/secret":                       "admin operator partner",
	"GET /console/endpoints/{endpoint_id}/diagnose":       "admin operator partner",
	"POST /console/endpoints/{endpoint_id}/diagnose":      "admin operator partner",
	"POST /console/endpoints/{endpoint_id}/test":          "admin operator partner",
	"POST /console/endpoints/{endpoint_id}/enable":        "admin operator partner",
	"POST /console/endpoints/{endpoint_id}/recover":       "admin operator partner",
	"GET /console/endpoints/{endpoint_id}/delete":         "admin operator",
	"POST /console/endpoints/{endpoint_id}/delete":        "admin operator",
	"GET /console/events":                                 "admin operator viewer partner",
	"GET /console/audit":                                  "admin",
	"GET /console/events/{event_id}":                      "admin operator viewer partner",
	"POST /console/events/{event_id}/replay":              "admin operator partner",
	"POST /console/sandbox/clock":                         "admin operator",
	"GET /console/*":                                      "admin operator viewer partner",
}

// publicOperatorRoutes need no key: every role, and no role, reaches them.
var publicOperatorRoutes = map[string]bool{
	"GET /healthz": true, "GET /readyz": true, "GET /admin/v1/openapi.json": true,
	"GET /console": true, "GET /console/static/console.css": true, "GET /console/static/favicon.svg": true,
	"GET /console/sign-in": true, "POST /console/sign-in": true, "GET /console/sign-in/{token}": true,
	"POST /console/sign-out": true,
}

// rolesFixture is what the walk needs: a tenant with an endpoint and an
// event, and a key of each role, the partner key being the tenant's
// partner's.
type rolesFixture struct {
	env    *testsuite.Env
	tn     *testsuite.Tenant
	keys   map[string]string
	params map[string]string
}

func newRolesFixture(t *testing.T) *rolesFixture {
	env := testsuite.Start(t)
	env.RequireInProcess(t)
	tn := env.NewTenant(t)
	endpointID, _ := registerEndpoint(t, env, tn.PartnerID, "https://hooks.example.test/"+testsuite.Unique("h"))
	scid := prescribe(t, env, tn)
	event := eventOf(t, env, tn, scid)
	doomedKey, _ := operatorKey(t, env, rViewer)
	f := &rolesFixture{env: env, tn: tn, keys: map[string]string{rAdmin: env.AdminKey}}
	for _, role := range []string{rOperator, rViewer} {
		_, f.keys[role] = operatorKey(t, env, role)
	}
	_, f.keys[rPartner] = operatorKey(t, env, "partner:"+tn.PartnerID)
	f.params = map[string]string{
		"organization_id": tn.OrgID,
		"user_id":         tn.UserID(testsuite.RolePrescriber),
		"patient_id":      tn.PatientID,
		"partner_id":      tn.PartnerID,
		"scid":            scid,
		"endpoint_id":     endpointID,
		"event_id":        event["event_id"].(string),
		"key_id":          doomedKey,
	}
	return f
}

// fill turns a route's path into a URL path with the fixture's ids; a
// route that deletes an endpoint gets one made for it, so that the others
// keep theirs.
func (f *rolesFixture) fill(t *testing.T, route string) string {
	t.Helper()
	method, path, _ := strings.Cut(route, " ")
	deletes := method == http.MethodDelete || strings.HasSuffix(path, "/delete")
	parts := strings.Split(path, "/")
	for i, p := range parts {
		name, ok := strings.CutPrefix(p, "{")
		switch {
		case ok && deletes && name == "endpoint_id}":
			parts[i], _ = registerEndpoint(t, f.env, f.tn.PartnerID, "https://hooks.example.test/"+testsuite.Unique("d"))
		case ok:
			v, known := f.params[strings.TrimSuffix(name, "}")]
			require.True(t, known, "%s: the walk has no value for %s", route, p)
			parts[i] = v
		case p == "*":
			parts[i] = "no-such-page"
		}
	}
	return strings.Join(parts, "/")
}

// TestRolesEveryRoute walks every route of the operator listener, from
// the server's own route table, with a key of each role, the console's
// pages and forms with a session of each, and checks the roles matrix
// (rolesMatrix): a refused role gets 403 (insufficient-role in the
// operator API), an allowed one gets past the check, and reads answer 200.
func TestRolesEveryRoute(t *testing.T) {
	t.Parallel()
	f := newRolesFixture(t)
	env := f.env
	allowed := func(t *testing.T, route, role string) bool {
		t.Helper()
		roles, ok := rolesMatrix[route]
		require.True(t, ok, "%s has no row in rolesMatrix: give it a permission in app/routes.go and a row here", route)
		return strings.Contains(" "+roles+" ", " "+role+" ")
	}

	_, admin := env.App.Routes()
	require.NotEmpty(t, admin)
	t.Run("api", func(t *testing.T) {
		for _, r := range admin {
			route := r.Method + " " + r.Path
			if publicOperatorRoutes[route] || r.Method == http.MethodHead {
				continue
			}
			t.Run(route, func(t *testing.T) {
				for _, role := range allRoles {
					res := env.Do(t, testsuite.Request{Method: r.Method, URL: env.AdminURL + f.fill(t, route), Token: f.keys[role]})
					if allowed(t, route, role) {
						assert.NotContains(t, []int{401, 403}, res.Status, "%s may %s: %s", role, route, res.Body)
						want := http.StatusOK
						if r.Path == "/admin/v1/backup" && testsuite.OnPostgres() {
							want = http.StatusNotImplemented // pg_dump's work there
						}
						if r.Method == http.MethodGet {
							assert.Equal(t, want, res.Status, "%s %s: %.300s", role, route, res.Body)
						}
					} else {
						assert.Equal(t, http.StatusForbidden, res.Status, "%s may not %s: %.300s", role, route, res.Body)
						assert.Equal(t, "insufficient-role", res.Slug(), "%s %s", role, route)
					}
				}
			})
		}
	})

	t.Run("console", func(t *testing.T) {
		sessions := map[string]*console{}
		csrf := map[string]string{}
		for _, role := range allRoles {
			sessions[role] = newConsole(t, env)
			csrf[role] = sessions[role].signInWith(f.keys[role])
		}
		for _, r := range env.App.ConsoleRoutes() {
			route := r.Method + " " + r.Path
			if publicOperatorRoutes[route] || r.Method == http.MethodHead {
				continue
			}
			t.Run(route, func(t *testing.T) {
				for _, role := range allRoles {
					p := sessions[role].do(r.Method, f.fill(t, route), formFor(r.Method, csrf[role]), nil)
					if !allowed(t, route, role) {
						assert.Equal(t, http.StatusForbidden, p.status, "%s may not %s: %.300s", role, route, p.body)
						continue
					}
					assert.NotContains(t, []int{401, 403}, p.status, "%s may %s: %.300s", role, route, p.body)
					assert.NotEqual(t, "/console/sign-in", p.header.Get("Location"), "%s %s", role, route)
					if r.Method == http.MethodGet && r.Path != "/console/*" && !(r.Path == "/console/" && role == rPartner) {
						assert.Equal(t, http.StatusOK, p.status, "%s %s: %.300s", role, route, p.body)
					}
				}
			})
		}
	})
}

// TestOperatorKeys: an admin creates keys (the key shown once, never
// listed), names are unique for good, a partner role names an existing
// partner; a key works until revoked, and then neither its API calls nor
// its console session survive the revocation; admin.api_key stays admin.
func TestOperatorKeys(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	name := testsuite.Unique("ci-")
	r := env.MustAdmin(t, http.MethodPost, operatorKeysPath, map[string]any{"name": name, "role": "operator"}, http.StatusCreated)
	id, key := r.String(t, "data.key_id"), r.String(t, "data.key")
	require.True(t, strings.HasPrefix(key, "rxk_"+id+"_"), "the key carries its id: %s", r.Body)
	assert.Equal(t, "no-store", r.Header.Get("Cache-Control"))

	list := env.MustAdmin(t, http.MethodGet, operatorKeysPath, nil, http.StatusOK)
	assert.NotContains(t, string(list.Body), key[len(key)-20:], "a list never shows a key")
	assert.Contains(t, string(list.Body), name)

	for _, tc := range []struct {
		body  map[string]any
		want  int
		field string
	}{
		{map[string]any{"name": name, "role": "viewer"}, http.StatusConflict, ""},
		{map[string]any{"name": testsuite.Unique("k-"), "role": "root"}, http.StatusUnprocessableEntity, "role"},
		{map[string]any{"name": testsuite.Unique("k-"), "role": "partner:0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e"}, http.StatusUnprocessableEntity, "role"},
		{map[string]any{"name": " ", "role": "viewer"}, http.StatusUnprocessableEntity, "name"},
	} {
		r := env.Admin(t, http.MethodPost, operatorKeysPath, tc.body)
		assert.Equal(t, tc.want, r.Status, "%v: %s", tc.body, r.Body)
		if tc.field != "" {
			assert.Equal(t, []string{tc.field}, r.ValidationFields(), "%v", tc.body)
		}
	}

	call := func(key string) *testsuite.Response {
		return env.Do(t, testsuite.Request{URL: env.AdminPath("/admin/v1/overview"), Token: key})
	}
	require.Equal(t, http.StatusOK, call(key).Status)
	assert.Equal(t, http.StatusUnauthorized, call(key+"x").Status, "a wrong secret with a right id")
	assert.Equal(t, http.StatusForbidden, env.Do(t, testsuite.Request{URL: env.AdminPath("/admin/v1/tokens"), Method: http.MethodPost, Token: key,
		Body: map[string]any{}}).Status, "an operator may not mint tokens")

	var c *console
	if !testsuite.BehindReplicas() {
		c = newConsole(t, env)
		c.signInWith(key)
		home := c.get("/console/")
		require.Equal(t, http.StatusOK, home.status)
		assert.Contains(t, home.body, `id="who-name">`+name+`<`)
		assert.Contains(t, home.body, `id="who-role">operator<`)
	}

	revoked := env.MustAdmin(t, http.MethodPost, operatorKeysPath+"/"+id+"/revoke", nil, http.StatusOK)
	assert.NotEmpty(t, revoked.String(t, "data.revoked_at"))
	res := call(key)
	assert.Equal(t, http.StatusUnauthorized, res.Status, "a revoked key stops at once: %s", res.Body)
	if c != nil {
		p := c.get("/console/events")
		assert.Equal(t, http.StatusSeeOther, p.status, "the revoked key's session ends")
		assert.Equal(t, "/console/sign-in", p.header.Get("Location"))
		p = c.post("/console/sign-in", url.Values{"key": {key}})
		assert.Equal(t, http.StatusUnauthorized, p.status, "a revoked key cannot sign in")
	}
	env.MustAdmin(t, http.MethodPost, operatorKeysPath+"/0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e/revoke", nil, http.StatusNotFound)

	if c != nil {
		c := newConsole(t, env)
		c.signIn()
		home := c.get("/console/")
		assert.Contains(t, home.body, `id="who-name">admin (config)<`, "admin.api_key signs in as an admin")
		assert.Contains(t, home.body, `id="who-role">admin<`)
	}
}

// TestPartnerKeyScope: a partner key sees its own partner's
// organizations, endpoints and events only; another partner's are 404,
// exactly as ids that do not exist, and lists leave them out; the console
// hides what the role may not use.
func TestPartnerKeyScope(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	mine, theirs := env.NewTenant(t), env.NewTenant(t)
	ids := map[*testsuite.Tenant]map[string]string{}
	for _, tn := range []*testsuite.Tenant{mine, theirs} {
		endpointID, _ := registerEndpoint(t, env, tn.PartnerID, "https://hooks.example.test/"+testsuite.Unique("h"))
		event := eventOf(t, env, tn, prescribe(t, env, tn))
		ids[tn] = map[string]string{"org": tn.OrgID, "endpoint": endpointID, "event": event["event_id"].(string)}
	}
	_, key := operatorKey(t, env, "partner:"+mine.PartnerID)
	do := func(method, path string) *testsuite.Response {
		return env.Do(t, testsuite.Request{Method: method, URL: env.AdminPath(path), Token: key})
	}

	const unknown = "0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e"
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/admin/v1/organizations/%s"},
		{http.MethodGet, "/admin/v1/organizations/%s/users"},
		{http.MethodGet, "/admin/v1/webhook-endpoints/%s"},
		{http.MethodPost, "/admin/v1/webhook-endpoints/%s/rotate-secret"},
		{http.MethodPost, "/admin/v1/webhook-endpoints/%s/enable"},
		{http.MethodPost, "/admin/v1/webhook-endpoints/%s/recover"},
		{http.MethodGet, "/admin/v1/events/%s"},
		{http.MethodPost, "/admin/v1/events/%s/replay"},
	} {
		kind := map[bool]string{true: "org", false: "endpoint"}[strings.Contains(tc.path, "organizations")]
		if strings.Contains(tc.path, "events") {
			kind = "event"
		}
		own := do(tc.method, strings.Replace(tc.path, "%s", ids[mine][kind], 1))
		assert.NotEqual(t, http.StatusNotFound, own.Status, "%s %s of its own partner: %s", tc.method, tc.path, own.Body)
		other := do(tc.method, strings.Replace(tc.path, "%s", ids[theirs][kind], 1))
		none := do(tc.method, strings.Replace(tc.path, "%s", unknown, 1))
		assert.Equal(t, http.StatusNotFound, other.Status, "%s %s of another partner: %s", tc.method, tc.path, other.Body)
		assert.Equal(t, none.Status, other.Status, "%s %s", tc.method, tc.path)
		assert.Equal(t, none.Slug(), other.Slug(), "%s %s", tc.method, tc.path)
		od, _ := other.Get("error.detail")
		nd, _ := none.Get("error.detail")
		assert.Equal(t, nd, od, "%s %s: another partner's resource answers as one that does not exist", tc.method, tc.path)
	}

	lists := map[string]string{
		"/admin/v1/organizations":                                    "organization_id",
		"/admin/v1/partners":                                         "partner_id",
		"/admin/v1/webhook-endpoints":                                "endpoint_id",
		"/admin/v1/webhook-endpoints?partner_id=" + theirs.PartnerID: "endpoint_id",
		"/admin/v1/events?limit=100":                                 "event_id",
		"/admin/v1/events?limit=100&organization_id=" + theirs.OrgID: "event_id",
	}
	for path := range lists {
		r := do(http.MethodGet, path)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", path, r.Body)
		for _, v := range []string{theirs.PartnerID, theirs.OrgID, ids[theirs]["endpoint"], ids[theirs]["event"]} {
			assert.NotContains(t, string(r.Body), v, "%s shows another partner's resource", path)
		}
	}
	// Not even the pagination tells another partner's organization from
	// one that does not exist.
	prescribe(t, env, theirs)
	r := do(http.MethodGet, "/admin/v1/events?limit=1&organization_id="+theirs.OrgID)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	hasNext, _ := r.Get("pagination.hasNext")
	assert.Equal(t, false, hasNext, "another partner's organization lists as an unknown one: %s", r.Body)
	r = do(http.MethodGet, "/admin/v1/organizations")
	assert.Contains(t, string(r.Body), mine.OrgID)
	r = do(http.MethodGet, "/admin/v1/events?limit=100&organization_id="+mine.OrgID)
	assert.Contains(t, string(r.Body), ids[mine]["event"])
	// The whole log, narrowed to the partner in the store: its one
	// event is the first page's, and the pagination counts the
	// partner's events alone, whatever else the log holds.
	r = do(http.MethodGet, "/admin/v1/events?limit=1")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	for path, want := range map[string]any{"data.0.event_id": ids[mine]["event"], "pagination.count": float64(1),
		"pagination.offset": float64(0), "pagination.hasNext": false} {
		got, _ := r.Get(path)
		assert.Equal(t, want, got, "%s: %s", path, r.Body)
	}

	if testsuite.BehindReplicas() {
		return
	}
	c := newConsole(t, env)
	c.signInWith(key)
	assert.Equal(t, "/console/events", c.get("/console/").header.Get("Location"), "a partner's home is its events")
	p := c.get("/console/organizations/" + theirs.OrgID)
	assert.Equal(t, http.StatusNotFound, p.status)
	p = c.get("/console/endpoints")
	assert.Contains(t, p.body, ids[mine]["endpoint"])
	assert.NotContains(t, p.body, ids[theirs]["endpoint"])
	assert.Contains(t, p.body, "Rotate secret")
	assert.NotContains(t, p.body, `id="register"`, "a partner may not register endpoints")
	assert.NotContains(t, p.body, "/delete", "a partner may not delete endpoints")
	assert.NotContains(t, p.body, `href="/console/">Overview`, "a partner may not see the overview")
	p = c.get("/console/events")
	assert.NotContains(t, p.body, ids[theirs]["event"])
	assert.NotContains(t, p.body, theirs.OrgName, "the organization filter lists its own organizations only")

	_, viewerKey := operatorKey(t, env, "viewer")
	v := newConsole(t, env)
	v.signInWith(viewerKey)
	p = v.get("/console/organizations/" + mine.OrgID)
	require.Equal(t, http.StatusOK, p.status)
	assert.NotContains(t, p.body, mine.Emails[testsuite.RolePrescriber], "a viewer sees no users")
	assert.NotContains(t, p.body, `id="users"`)
	p = v.get("/console/events/" + ids[mine]["event"])
	assert.NotContains(t, p.body, `id="replay"`, "a viewer may not replay")
	p = v.get("/console/endpoints")
	assert.NotContains(t, p.body, "Rotate secret")
	assert.NotContains(t, p.body, `id="register"`)
}
