package testsuite_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// crossEndpoint is one operation of issue 4, its path built from an
// organization, a user and a drug id.
type crossEndpoint struct {
	name     string
	method   string
	path     func(org, user, drug string) string
	body     any
	drugOp   bool // a custom drug operation: refusals are 401, not 403
	hasUser  bool // the path names a user
	hasDrug  bool // the path names a drug
	bulkOnly bool // organization-level: no user in the path
}

func crossEndpoints() []crossEndpoint {
	org := func(o string) string { return "/v1/organizations/" + o }
	user := func(o, u string) string { return org(o) + "/users/" + u }
	return []crossEndpoint{
		{name: "list custom drugs", method: http.MethodGet, drugOp: true, hasUser: true,
			path: func(o, u, _ string) string { return user(o, u) + "/custom-drugs" }},
		{name: "create custom drug", method: http.MethodPost, drugOp: true, hasUser: true, body: sampleDrug("Planted by A"),
			path: func(o, u, _ string) string { return user(o, u) + "/custom-drugs" }},
		{name: "update custom drug", method: http.MethodPut, drugOp: true, hasUser: true, hasDrug: true,
			body: map[string]any{"item_generic_name": "Changed by A", "brand_name": "Changed by A"},
			path: func(o, u, d string) string { return user(o, u) + "/custom-drugs/" + d }},
		{name: "delete custom drug", method: http.MethodDelete, drugOp: true, hasUser: true, hasDrug: true,
			path: func(o, u, d string) string { return user(o, u) + "/custom-drugs/" + d }},
		{name: "bulk create", method: http.MethodPost, drugOp: true, bulkOnly: true, body: []any{sampleDrug("Planted by A")},
			path: func(o, _, _ string) string { return org(o) + "/custom-drugs" }},
		{name: "list users", method: http.MethodGet, bulkOnly: true,
			path: func(o, _, _ string) string { return org(o) + "/users" }},
		{name: "read user", method: http.MethodGet, hasUser: true,
			path: func(o, u, _ string) string { return user(o, u) }},
		{name: "disable user", method: http.MethodPut, hasUser: true,
			path: func(o, u, _ string) string { return user(o, u) + "/disable" }},
		{name: "enable user", method: http.MethodPut, hasUser: true,
			path: func(o, u, _ string) string { return user(o, u) + "/enable" }},
	}
}

// crossSnapshot is everything of an organization the matrix must not
// change, read through its own tokens and the operator API.
type crossSnapshot struct {
	drugs     map[string]map[string]map[string]any // role -> drug id -> drug
	users     []any                                // the partner user list
	userViews map[string]any                       // role -> the partner read of the user
	admin     map[string]any                       // role -> the operator read of the user
}

func snapshotOrg(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant) crossSnapshot {
	t.Helper()
	owner := tn.Token(t, testsuite.RoleOwner)
	s := crossSnapshot{drugs: map[string]map[string]map[string]any{}, userViews: map[string]any{}, admin: map[string]any{}}
	for _, role := range testsuite.Roles {
		s.drugs[role] = listDrugs(t, env, tn, owner, role)
		r := callPartner(t, env, tn, http.MethodGet, userPath(tn, role), owner, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		s.userViews[role], _ = r.Get("data")
		r = env.MustAdmin(t, http.MethodGet, tn.UserPath(role), nil, http.StatusOK)
		s.admin[role], _ = r.Get("data")
	}
	r := callPartner(t, env, tn, http.MethodGet, usersPath(tn)+"?limit=100", owner, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	v, _ := r.Get("data")
	s.users, _ = v.([]any)
	return s
}

// TestCrossOrganizationMatrix aims tokens of organization A at organization
// B through every endpoint of issue 4: B's organization in the path, A's
// organization with B's user, A's organization and user with B's drugs. Every
// call is refused (401, 403 or 404 as spec section 5 says), no answer holds
// anything of B the caller did not send, and B's data is unchanged
// afterwards. B is under another partner, and under A's own partner.
func TestCrossOrganizationMatrix(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tests := []struct {
		name        string
		samePartner bool
	}{
		{name: "another partner"},
		{name: "the same partner", samePartner: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := env.NewTenant(t)
			var opts []testsuite.TenantOption
			if tt.samePartner {
				opts = append(opts, testsuite.WithPartner(a.PartnerID, a.PartnerSecret))
			}
			b := env.NewTenant(t, opts...)
			runCrossMatrix(t, env, a, b)
		})
	}
}

func runCrossMatrix(t *testing.T, env *testsuite.Env, a, b *testsuite.Tenant) {
	// B's data: organization-level and user-level drugs, users.
	bOrgName := testsuite.Unique("B org drug ")
	bOrgDrug := mustBulkDrugs(t, env, b, bOrgName)[0]
	bRxName := testsuite.Unique("B prescriber drug ")
	bRxDrug := mustCreateDrug(t, env, b, b.Token(t, testsuite.RolePrescriber), testsuite.RolePrescriber, sampleDrug(bRxName))
	bAdminName := testsuite.Unique("B admin drug ")
	bAdminDrug := mustCreateDrug(t, env, b, b.Token(t, testsuite.RoleAdmin), testsuite.RoleAdmin, sampleDrug(bAdminName))
	bDrugs := []string{bOrgDrug, bRxDrug, bAdminDrug}
	bDrugNames := map[string]string{bOrgDrug: "organization-level drug", bRxDrug: "prescriber's drug", bAdminDrug: "admin's drug"}

	// Everything of B an answer must not hold, unless the caller sent it.
	secretsOfB := []string{b.OrgID, b.OrgName, b.OrgSecret, bOrgName, bRxName, bAdminName, b.PatientID}
	secretsOfB = append(secretsOfB, bDrugs...)
	for _, role := range testsuite.Roles {
		secretsOfB = append(secretsOfB, b.Users[role], b.Emails[role])
	}
	if b.PartnerID != a.PartnerID {
		secretsOfB = append(secretsOfB, b.PartnerID)
	}

	beforeB, beforeA := snapshotOrg(t, env, b), snapshotOrg(t, env, a)

	aAdmin, aRx := a.Token(t, testsuite.RoleAdmin), a.Token(t, testsuite.RolePrescriber)
	tokens := []struct {
		name, role, token string
	}{
		{"A's admin", testsuite.RoleAdmin, aAdmin},
		{"A's prescriber", testsuite.RolePrescriber, aRx},
	}
	secrets := []struct {
		name    string
		headers map[string]string
	}{
		{"A's secret", a.Headers()},
		{"B's secret", b.Headers()},
	}

	type row struct {
		name    string
		method  string
		path    string
		token   string
		headers map[string]string
		body    any
		status  int
	}
	var rows []row
	for _, ep := range crossEndpoints() {
		// B's organization in the path, with B's user and drug, or with A's
		// own user: the token's user is not a member of B.
		for _, tok := range tokens {
			for _, sec := range secrets {
				rows = append(rows, row{
					name:   ep.name + "/B's organization, B's user and drug/" + tok.name + " with " + sec.name,
					method: ep.method, path: ep.path(b.OrgID, b.Users[testsuite.RolePrescriber], bRxDrug),
					token: tok.token, headers: sec.headers, body: ep.body, status: http.StatusUnauthorized,
				})
			}
			if ep.hasUser {
				rows = append(rows, row{
					name:   ep.name + "/B's organization, A's user/" + tok.name,
					method: ep.method, path: ep.path(b.OrgID, a.Users[tok.role], bRxDrug),
					token: tok.token, headers: a.Headers(), body: ep.body, status: http.StatusUnauthorized,
				})
			}
		}
		if ep.bulkOnly {
			continue
		}
		// A's organization with B's users (and drugs): not users of A.
		for _, bUser := range []string{testsuite.RolePrescriber, testsuite.RoleOwner} {
			drug := bRxDrug
			if bUser == testsuite.RoleOwner {
				drug = bOrgDrug
			}
			for _, tok := range tokens {
				status := http.StatusNotFound
				if ep.drugOp && !ep.hasDrug {
					// Custom drug list and create for a user not in the
					// organization: 401 (spec 4.2 and 4.3 list no 404).
					status = http.StatusUnauthorized
				}
				if tok.role == testsuite.RolePrescriber {
					// Acting for another user: 401 on custom drug
					// operations, 403 on the others.
					status = http.StatusForbidden
					if ep.drugOp {
						status = http.StatusUnauthorized
					}
				}
				rows = append(rows, row{
					name:   ep.name + "/A's organization, B's " + bUser + "/" + tok.name,
					method: ep.method, path: ep.path(a.OrgID, b.Users[bUser], drug),
					token: tok.token, headers: a.Headers(), body: ep.body, status: status,
				})
			}
		}
		// A's organization and user with B's drugs.
		if ep.hasDrug {
			for _, drug := range bDrugs {
				for _, tok := range tokens {
					rows = append(rows, row{
						name:   ep.name + "/A's organization and user, B's " + bDrugNames[drug] + "/" + tok.name,
						method: ep.method, path: ep.path(a.OrgID, a.Users[tok.role], drug),
						token: tok.token, headers: a.Headers(), body: ep.body, status: http.StatusNotFound,
					})
				}
			}
		}
	}
	// A's own lists never reach into B.
	rows = append(rows,
		row{name: "list users/A's own organization", method: http.MethodGet, path: usersPath(a) + "?limit=100",
			token: aAdmin, headers: a.Headers(), status: http.StatusOK},
		row{name: "list custom drugs/A's own user", method: http.MethodGet, path: drugsPath(a, testsuite.RolePrescriber),
			token: aRx, headers: a.Headers(), status: http.StatusOK},
	)

	scenarios := make([]testsuite.Scenario, 0, len(rows))
	for _, r := range rows {
		var hide []string
		for _, s := range secretsOfB {
			if !strings.Contains(r.path, s) {
				hide = append(hide, s)
			}
		}
		sc := testsuite.Scenario{Name: r.name, Method: r.method, Path: r.path, Token: r.token, Headers: r.headers,
			Body: r.body, Status: r.status, NotContains: hide}
		if r.status == http.StatusUnauthorized {
			sc.Slug = slugAuth
		}
		scenarios = append(scenarios, sc)
	}
	testsuite.RunScenarios(t, env, scenarios)

	t.Run("B is unchanged", func(t *testing.T) {
		after := snapshotOrg(t, env, b)
		assert.Equal(t, beforeB, after)
		for _, role := range testsuite.Roles {
			status, userRole := userState(t, env, b, role)
			assert.Equal(t, []string{"enabled", role}, []string{status, userRole}, "B's %s", role)
		}
		r := env.MustAdmin(t, http.MethodGet, b.OrgPath(), nil, http.StatusOK)
		v, _ := r.Get("data.validated")
		assert.Equal(t, false, v, "B was not validated")
	})
	t.Run("A is unchanged", func(t *testing.T) {
		assert.Equal(t, beforeA, snapshotOrg(t, env, a), "nothing was planted in A for B's users or drugs")
	})
}
