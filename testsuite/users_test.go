package testsuite_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// usersPath is the partner path of tn's user list (spec 4.9).
func usersPath(tn *testsuite.Tenant) string {
	return "/v1/organizations/" + tn.OrgID + "/users"
}

// userPath is the partner path of one user of tn (a role or an id).
func userPath(tn *testsuite.Tenant, user string) string {
	return usersPath(tn) + "/" + tn.UserID(user)
}

// addUsers creates n more members in tn through the operator API and
// returns their ids by e-mail.
func addUsers(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, n int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for range n {
		email := testsuite.Unique("extra-") + "@example.test"
		r := env.MustAdmin(t, http.MethodPost, tn.OrgPath()+"/users", map[string]any{
			"email": email, "given_name": "Sam", "family_name": "Lee", "title": "Ms", "role": testsuite.RoleMember,
		}, http.StatusCreated)
		out[email] = r.String(t, "data.user_id")
	}
	return out
}

// userState reads user (a role or an id) through the operator API and
// returns its status and role.
func userState(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, user string) (status, role string) {
	t.Helper()
	r := env.MustAdmin(t, http.MethodGet, tn.UserPath(user), nil, http.StatusOK)
	return r.String(t, "data.status"), r.String(t, "data.role")
}

// limitEntry checks a 400 with a validation entry for limit.
func limitEntry(t testing.TB, r *testsuite.Response) {
	t.Helper()
	assert.Equal(t, []string{"limit"}, r.ValidationFields())
}

// TestUsersList covers spec 4.9: page sizes, the cursor, the members of
// each user, and the scopes.
func TestUsersList(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	extra := addUsers(t, env, tn, 21) // 25 users in all
	want := map[string]string{}       // user_id -> email
	for role, id := range tn.Users {
		want[id] = tn.Emails[role]
	}
	for email, id := range extra {
		want[id] = email
	}
	member := tn.Token(t, testsuite.RoleMember)
	page := func(limit int) func(testing.TB, *testsuite.Response) {
		return func(t testing.TB, r *testsuite.Response) {
			t.Helper()
			var users []map[string]any
			r.DecodeData(t, &users)
			require.Len(t, users, limit)
			for _, u := range users {
				assert.ElementsMatch(t, []string{"user_id", "email"}, slices.Collect(maps.Keys(u)), "%v", u)
				assert.Equal(t, want[u["user_id"].(string)], u["email"])
			}
			p, _ := r.Get("pagination")
			pg, ok := p.(map[string]any)
			require.True(t, ok, "pagination is %v", p)
			assert.EqualValues(t, limit, pg["count"])
			assert.EqualValues(t, true, pg["hasNext"])
			assert.NotEmpty(t, pg["lastKey"])
		}
	}

	scenarios := []testsuite.Scenario{
		{Name: "default limit 20", Path: usersPath(tn), Token: member, Headers: tn.Headers(), Status: http.StatusOK, Check: page(20)},
		{Name: "limit 1", Path: usersPath(tn) + "?limit=1", Token: member, Headers: tn.Headers(), Status: http.StatusOK, Check: page(1)},
		{Name: "limit 24", Path: usersPath(tn) + "?limit=24", Token: member, Headers: tn.Headers(), Status: http.StatusOK, Check: page(24)},
		{Name: "limit 100", Path: usersPath(tn) + "?limit=100", Token: member, Headers: tn.Headers(), Status: http.StatusOK,
			Check: func(t testing.TB, r *testsuite.Response) {
				var users []map[string]any
				r.DecodeData(t, &users)
				assert.Len(t, users, len(want))
				v, _ := r.Get("pagination.hasNext")
				assert.Equal(t, false, v)
				v, present := r.Get("pagination.lastKey")
				assert.True(t, present, "lastKey is present")
				assert.Nil(t, v, "lastKey is null on the last page")
			}},
		{Name: "scope READ_USER", Path: usersPath(tn), Token: tn.Token(t, testsuite.RoleMember, "READ_USER"), Headers: tn.Headers(), Status: http.StatusOK},
		{Name: "scope read:users", Path: usersPath(tn), Token: tn.Token(t, testsuite.RoleMember, "read:users"), Headers: tn.Headers(), Status: http.StatusOK},
		{Name: "no user scope", Path: usersPath(tn), Token: tn.Token(t, testsuite.RoleOwner, scopesWithout("READ_USER", "read:users")...),
			Headers: tn.Headers(), Status: http.StatusForbidden, Slug: slugInsufficientScope, NotContains: []string{tn.Emails[testsuite.RoleOwner]}},
		{Name: "no token", Path: usersPath(tn), Headers: tn.Headers(), Status: http.StatusUnauthorized, Slug: slugAuth,
			NotContains: []string{tn.Emails[testsuite.RoleOwner]}},
		{Name: "bad cursor", Path: usersPath(tn) + "?lastKey=not-a-cursor", Token: member, Headers: tn.Headers(), Status: http.StatusBadRequest,
			Check: func(t testing.TB, r *testsuite.Response) { assert.Equal(t, []string{"lastKey"}, r.ValidationFields()) }},
	}
	for _, limit := range []string{"0", "101", "-1", "1000", "abc", "1.5"} {
		scenarios = append(scenarios, testsuite.Scenario{
			Name: "limit " + limit, Path: usersPath(tn) + "?limit=" + limit, Token: member, Headers: tn.Headers(),
			Status: http.StatusBadRequest, Slug: slugValidationError, Check: limitEntry,
		})
	}
	testsuite.RunScenarios(t, env, scenarios)

	tests := []struct {
		name  string
		limit int
	}{
		{name: "walk by 1", limit: 1},
		{name: "walk by 7", limit: 7},
		{name: "walk by 20", limit: 20},
		{name: "walk by 25", limit: 25},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			seen := map[string]int{}
			cursor, pages := "", 0
			for {
				path := usersPath(tn) + "?limit=" + strconv.Itoa(tt.limit)
				if cursor != "" {
					path += "&lastKey=" + cursor
				}
				r := callPartner(t, env, tn, http.MethodGet, path, member, nil)
				require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
				var users []struct {
					UserID string `json:"user_id"`
				}
				r.DecodeData(t, &users)
				for _, u := range users {
					seen[u.UserID]++
				}
				pages++
				require.LessOrEqual(t, pages, len(want)+1, "the cursor does not end")
				v, _ := r.Get("pagination.lastKey")
				next, _ := v.(string)
				hasNext, _ := r.Get("pagination.hasNext")
				assert.Equal(t, next != "", hasNext, "hasNext agrees with lastKey")
				if next == "" {
					break
				}
				cursor = next
			}
			assert.Len(t, seen, len(want))
			for id, n := range seen {
				assert.Equal(t, 1, n, "user %s seen %d times", id, n)
				assert.Contains(t, want, id)
			}
			assert.Equal(t, (len(want)+tt.limit-1)/tt.limit, pages)
		})
	}
}

// TestUsersRead covers reading one user (spec 4.10).
func TestUsersRead(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	adminTok := tn.Token(t, testsuite.RoleAdmin)
	rx := tn.Token(t, testsuite.RolePrescriber)
	detail := func(role string) func(testing.TB, *testsuite.Response) {
		return func(t testing.TB, r *testsuite.Response) {
			t.Helper()
			var u map[string]any
			r.DecodeData(t, &u)
			created, _ := u["created_at"].(string)
			_, err := time.Parse(time.RFC3339Nano, created)
			assert.NoError(t, err, "created_at %q", created)
			delete(u, "created_at")
			assert.Equal(t, map[string]any{
				"user_id": tn.Users[role], "email": tn.Emails[role], "given_name": "Alex", "family_name": "Nguyen",
				"title": "Dr", "role": role, "status": "enabled",
			}, u)
		}
	}
	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{Name: "a manager reads a prescriber", Path: userPath(tn, testsuite.RolePrescriber), Token: adminTok, Headers: tn.Headers(),
			Status: http.StatusOK, Check: detail(testsuite.RolePrescriber)},
		{Name: "a user reads itself", Path: userPath(tn, testsuite.RolePrescriber), Token: rx, Headers: tn.Headers(),
			Status: http.StatusOK, Check: detail(testsuite.RolePrescriber)},
		{Name: "scope read:users", Path: userPath(tn, testsuite.RoleOwner), Token: tn.Token(t, testsuite.RoleAdmin, "read:users"), Headers: tn.Headers(),
			Status: http.StatusOK, Check: detail(testsuite.RoleOwner)},
		{Name: "unknown user", Path: userPath(tn, uuid.NewString()), Token: adminTok, Headers: tn.Headers(), Status: http.StatusNotFound},
		{Name: "user id that is not a uuid", Path: userPath(tn, "nobody"), Token: adminTok, Headers: tn.Headers(), Status: http.StatusNotFound},
		{Name: "a prescriber reads another user", Path: userPath(tn, testsuite.RoleAdmin), Token: rx, Headers: tn.Headers(),
			Status: http.StatusForbidden, NotContains: []string{tn.Emails[testsuite.RoleAdmin]}},
		{Name: "no user scope", Path: userPath(tn, testsuite.RolePrescriber), Token: tn.Token(t, testsuite.RoleAdmin, scopesWithout("READ_USER", "read:users")...),
			Headers: tn.Headers(), Status: http.StatusForbidden, Slug: slugInsufficientScope, NotContains: []string{tn.Emails[testsuite.RolePrescriber]}},
		{Name: "no token", Path: userPath(tn, testsuite.RolePrescriber), Headers: tn.Headers(), Status: http.StatusUnauthorized, Slug: slugAuth,
			NotContains: []string{tn.Emails[testsuite.RolePrescriber]}},
	})
}

// TestUsersDisableEnable walks table 3.2 row by row, with the 404 and 403
// answers of spec 4.7 and 4.8.
func TestUsersDisableEnable(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	adminTok := tn.Token(t, testsuite.RoleAdmin)
	rx := tn.Users[testsuite.RolePrescriber]
	disable, enable := userPath(tn, rx)+"/disable", userPath(tn, rx)+"/enable"
	state := func(status, role string) func(testing.TB, *testsuite.Response) {
		return func(t testing.TB, r *testsuite.Response) {
			t.Helper()
			dataEquals(map[string]any{"user_id": rx})(t, r)
			gotStatus, gotRole := userState(t, env, tn, rx)
			assert.Equal(t, []string{status, role}, []string{gotStatus, gotRole})
		}
	}
	messages := map[string]string{}
	message := func(row string, next func(testing.TB, *testsuite.Response)) func(testing.TB, *testsuite.Response) {
		return func(t testing.TB, r *testsuite.Response) {
			t.Helper()
			messages[row] = r.String(t, "message")
			next(t, r)
		}
	}
	put := func(name, path, token string, status int, check func(testing.TB, *testsuite.Response)) testsuite.Scenario {
		return testsuite.Scenario{Name: name, Method: http.MethodPut, Path: path, Token: token, Headers: tn.Headers(), Status: status, Check: check}
	}
	noUpdate := tn.Token(t, testsuite.RoleAdmin, scopesWithout("update:user", "delete:user")...)
	deleteOnly := tn.Token(t, testsuite.RoleAdmin, "delete:user")
	unknown := userPath(tn, uuid.NewString())

	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		put("enable on an enabled user: already enabled", enable, adminTok, http.StatusOK,
			message("already enabled", state("enabled", testsuite.RolePrescriber))),
		put("disable without update:user or delete:user", disable, noUpdate, http.StatusForbidden, nil),
		put("enable without update:user", enable, noUpdate, http.StatusForbidden, nil),
		put("enabled, disable: disabled and member", disable, adminTok, http.StatusOK,
			message("disabled", state("disabled", testsuite.RoleMember))),
		put("disabled, disable: already disabled", disable, adminTok, http.StatusOK,
			message("already disabled", state("disabled", testsuite.RoleMember))),
		put("enable with delete:user only", enable, deleteOnly, http.StatusForbidden, nil),
		put("disabled, enable: enabled as member", enable, adminTok, http.StatusOK,
			message("enabled", state("enabled", testsuite.RoleMember))),
		put("enabled, enable again: already enabled", enable, adminTok, http.StatusOK,
			message("already enabled again", state("enabled", testsuite.RoleMember))),
		put("disable with delete:user only", disable, deleteOnly, http.StatusOK, state("disabled", testsuite.RoleMember)),
		put("enable to restore", enable, adminTok, http.StatusOK, state("enabled", testsuite.RoleMember)),
		put("disable an unknown user", unknown+"/disable", adminTok, http.StatusNotFound, nil),
		put("enable an unknown user", unknown+"/enable", adminTok, http.StatusNotFound, nil),
		put("disable a user id that is not a uuid", userPath(tn, "nobody")+"/disable", adminTok, http.StatusNotFound, nil),
		put("disable without a token", disable, "", http.StatusUnauthorized, nil),
		put("enable without a token", enable, "", http.StatusUnauthorized, nil),
	})

	t.Run("messages differ by row", func(t *testing.T) {
		require.Len(t, messages, 5)
		assert.Equal(t, messages["already enabled"], messages["already enabled again"])
		distinct := map[string]bool{}
		for _, row := range []string{"disabled", "already disabled", "enabled", "already enabled"} {
			distinct[messages[row]] = true
		}
		assert.Len(t, distinct, 4, "%v", messages)
		assert.Contains(t, messages["already disabled"], "already")
		assert.Contains(t, messages["already enabled"], "already")
		assert.NotContains(t, messages["disabled"], "already")
		assert.NotContains(t, messages["enabled"], "already")
	})
}

// issue4Calls are every partner call of issue 4 (and validate) for the user
// (a role or id) of tn acting on itself, for checking that a token is
// refused everywhere.
func issue4Calls(tn *testsuite.Tenant, user string) []struct {
	name, method, path string
	body               any
} {
	drugs := drugsPath(tn, user)
	self := userPath(tn, user)
	return []struct {
		name, method, path string
		body               any
	}{
		{"validate", http.MethodGet, tn.ValidatePath(), nil},
		{"list custom drugs", http.MethodGet, drugs, nil},
		{"create custom drug", http.MethodPost, drugs, sampleDrug("While disabled")},
		{"update custom drug", http.MethodPut, drugs + "/" + uuid.NewString(), map[string]any{"brand_name": "x"}},
		{"delete custom drug", http.MethodDelete, drugs + "/" + uuid.NewString(), nil},
		{"bulk create", http.MethodPost, bulkDrugsPath(tn), []any{sampleDrug("While disabled")}},
		{"list users", http.MethodGet, usersPath(tn), nil},
		{"read user", http.MethodGet, self, nil},
		{"disable", http.MethodPut, self + "/disable", nil},
		{"enable", http.MethodPut, self + "/enable", nil},
	}
}

// TestUsersDisabledTokens checks that a disabled user's token is refused on
// every call and that no token is minted for it, that the token stays void
// after an enable (spec 3.2: tokens issued before a disable are void) while
// a token minted after the enable works, and that a former admin comes back
// as a member who can no longer bulk-create.
func TestUsersDisabledTokens(t *testing.T) {
	t.Parallel()
	// Without leeway, a token minted in the second after the enable's is
	// newer than the disable (with it, only one minted leeway later is).
	env := testsuite.Start(t, testsuite.WithConfig(func(c *config.Config) { c.Auth.Leeway = 0 }))
	tn := env.NewTenant(t)
	owner := tn.Token(t, testsuite.RoleOwner)
	target := testsuite.RoleAdmin
	tok := tn.Token(t, target)

	// Before: the admin may bulk-create.
	r := callPartner(t, env, tn, http.MethodPost, bulkDrugsPath(tn), tok, []any{sampleDrug("Before")})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	r = callPartner(t, env, tn, http.MethodPut, userPath(tn, target)+"/disable", owner, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	t.Run("disabled", func(t *testing.T) {
		for _, c := range issue4Calls(tn, target) {
			t.Run(c.name, func(t *testing.T) {
				r := callPartner(t, env, tn, c.method, c.path, tok, c.body)
				assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
				assert.Equal(t, slugAuth, r.Slug())
			})
		}
		t.Run("POST /v1/token", func(t *testing.T) {
			env.RequireBuiltinIssuer(t)
			r := env.Do(t, testsuite.Request{Method: http.MethodPost, URL: "/v1/token", Headers: tn.TokenHeaders(target),
				Body: map[string]any{"grantType": "client_credentials"}})
			env.CheckEnvelope(t, r)
			assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
			assert.NotContains(t, string(r.Body), "accessToken")
		})
		t.Run("POST /admin/v1/tokens", func(t *testing.T) {
			r := env.Admin(t, http.MethodPost, "/admin/v1/tokens", map[string]any{"organization_id": tn.OrgID, "user_id": tn.UserID(target)})
			env.CheckEnvelope(t, r)
			assert.GreaterOrEqual(t, r.Status, 400, "%s", r.Body)
			assert.NotContains(t, string(r.Body), "access_token")
		})
		t.Run("the other users still work", func(t *testing.T) {
			r := callPartner(t, env, tn, http.MethodGet, tn.ValidatePath(), tn.Token(t, testsuite.RolePrescriber), nil)
			assert.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		})
	})

	r = callPartner(t, env, tn, http.MethodPut, userPath(tn, target)+"/enable", owner, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	t.Run("enabled again, the token from before the disable", func(t *testing.T) {
		for _, c := range issue4Calls(tn, target) {
			t.Run(c.name, func(t *testing.T) {
				r := callPartner(t, env, tn, c.method, c.path, tok, c.body)
				assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
				assert.Equal(t, slugAuth, r.Slug())
			})
		}
	})

	// "iat" counts whole seconds and a token of the disable's second is
	// refused: mint the new one in the next second.
	waitNextSecond()
	tok = tn.Token(t, target)

	t.Run("enabled again", func(t *testing.T) {
		tests := []struct {
			name   string
			method string
			path   string
			body   any
			status int
		}{
			{name: "validate", method: http.MethodGet, path: tn.ValidatePath(), status: http.StatusOK},
			{name: "list custom drugs", method: http.MethodGet, path: drugsPath(tn, target), status: http.StatusOK},
			{name: "create custom drug", method: http.MethodPost, path: drugsPath(tn, target), body: sampleDrug("After"), status: http.StatusCreated},
			{name: "list users", method: http.MethodGet, path: usersPath(tn), status: http.StatusOK},
			{name: "read itself", method: http.MethodGet, path: userPath(tn, target), status: http.StatusOK},
			// A member now: the admin rule of bulk create refuses it, and it
			// may no longer act for other users.
			{name: "bulk create as a former admin", method: http.MethodPost, path: bulkDrugsPath(tn), body: []any{sampleDrug("After")},
				status: http.StatusUnauthorized},
			{name: "another user's drugs", method: http.MethodGet, path: drugsPath(tn, testsuite.RolePrescriber), status: http.StatusUnauthorized},
			{name: "read another user", method: http.MethodGet, path: userPath(tn, testsuite.RolePrescriber), status: http.StatusForbidden},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := callPartner(t, env, tn, tt.method, tt.path, tok, tt.body)
				assert.Equal(t, tt.status, r.Status, "%s", r.Body)
			})
		}
		t.Run("new tokens are minted", func(t *testing.T) {
			r := env.Admin(t, http.MethodPost, "/admin/v1/tokens", map[string]any{"organization_id": tn.OrgID, "user_id": tn.UserID(target)})
			assert.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
			fresh := r.String(t, "data.access_token")
			r = callPartner(t, env, tn, http.MethodPost, bulkDrugsPath(tn), fresh, []any{sampleDrug("After")})
			assert.Equal(t, http.StatusUnauthorized, r.Status, "a fresh token of the former admin is still a member's: %s", r.Body)
		})
		t.Run("role is member", func(t *testing.T) {
			status, role := userState(t, env, tn, target)
			assert.Equal(t, []string{"enabled", testsuite.RoleMember}, []string{status, role})
		})
	})

	t.Run("only the drug created before the disable is at organization level", func(t *testing.T) {
		var names []string
		for _, d := range listDrugs(t, env, tn, owner, testsuite.RoleOwner) {
			names = append(names, fmt.Sprint(d["item_generic_name"]))
		}
		assert.Equal(t, []string{"Before"}, names)
	})
}

// TestAuthMatrixDisabledUser is the disabled-user row of the
// authentication matrix (TestAuthMatrix): a token from an external identity
// provider, which the service cannot decline to mint, for a disabled user is
// refused with 401 authentication-required on validate, and stays refused
// once the user is enabled (it was issued before the disable), while a token
// issued after the enable is accepted.
func TestAuthMatrixDisabledUser(t *testing.T) {
	t.Parallel()
	// Without leeway (see TestUsersDisabledTokens); the leeway's part is
	// TestIssuedBeforeDisable's.
	env, idp := authEnv(t, testsuite.WithConfig(func(c *config.Config) { c.Auth.Leeway = 0 }))
	tn := env.NewTenant(t)
	user := tn.Users[testsuite.RolePrescriber]
	token := idp.Mint(idp.Claims(user, tn.OrgID, "read:patient_prescription"))
	admin := idp.Mint(idp.Claims(tn.Users[testsuite.RoleAdmin], tn.OrgID, "update:user"))
	setDisabled := func(t testing.TB, op string) {
		t.Helper()
		r := callPartner(t, env, tn, http.MethodPut, userPath(tn, user)+"/"+op, admin, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	}

	// mintAt mints a token of user issued d seconds from now.
	mintAt := func(d int64) string {
		c := idp.Claims(user, tn.OrgID, "read:patient_prescription")
		c["iat"] = time.Now().Unix() + d
		c["nbf"] = c["iat"]
		return idp.Mint(c)
	}
	withoutIat := func() string {
		c := idp.Claims(user, tn.OrgID, "read:patient_prescription")
		delete(c, "iat")
		return idp.Mint(c)
	}

	tests := []struct {
		name   string
		op     string        // disable or enable before the call, when set
		token  func() string // the token of the call, when not the one minted first
		status int
	}{
		{name: "enabled user", status: http.StatusOK},
		{name: "a token without iat, of a user never disabled", token: withoutIat, status: http.StatusOK},
		{name: "disabled user", op: "disable", status: http.StatusUnauthorized},
		{name: "disabled user again", status: http.StatusUnauthorized},
		// Spec 3.2: a disable voids the tokens issued before it.
		{name: "enabled again, the token from before the disable", op: "enable", status: http.StatusUnauthorized},
		{name: "a token issued after the enable", token: func() string { waitNextSecond(); return mintAt(0) }, status: http.StatusOK},
		{name: "another token issued before the disable", token: func() string { return mintAt(-2) }, status: http.StatusUnauthorized},
		{name: "a token without iat, of a user once disabled", token: withoutIat, status: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.op != "" {
				setDisabled(t, tt.op)
			}
			token := token
			if tt.token != nil {
				token = tt.token()
			}
			sc := testsuite.Scenario{Path: tn.ValidatePath(), Token: token, Headers: tn.Headers(), Status: tt.status}
			if tt.status != http.StatusOK {
				sc.Slug = slugAuth
				sc.NotContains = []string{`"validated"`}
			}
			testsuite.RunScenario(t, env, sc)
		})
	}
}

// waitNextSecond returns at the start of the next whole second: tokens
// count time in whole seconds ("iat").
func waitNextSecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second).Sub(now))
}

// TestUsersEnabledFreshToken checks that a token the built-in issuer mints
// right after an enable is accepted at once, whether auth.leeway (30 s by
// default) has passed or not and even in the second of the disable, while
// every token minted before a disable stays void: the one from before the
// first disable, and the one minted between the first enable and a second
// disable. It runs on the real clock (and so against any instance) and on
// a clock that stands still, where everything happens in one instant.
func TestUsersEnabledFreshToken(t *testing.T) {
	t.Parallel()
	envs := []struct {
		name string
		opts []testsuite.Option
	}{
		{name: "real clock"},
		{name: "clock standing still", opts: []testsuite.Option{
			testsuite.WithNow(fake.NewClock(time.Now().UTC().Truncate(time.Second).Add(400 * time.Millisecond)).Now),
		}},
	}
	// The two ways the built-in issuer mints: the operator API and the
	// partner token endpoint.
	mints := []struct {
		name string
		mint func(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, user string) string
	}{
		{name: "POST /admin/v1/tokens", mint: func(t testing.TB, _ *testsuite.Env, tn *testsuite.Tenant, user string) string {
			return tn.Token(t, user)
		}},
		{name: "POST /v1/token", mint: func(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, user string) string {
			t.Helper()
			r := env.Do(t, testsuite.Request{Method: http.MethodPost, URL: "/v1/token", Headers: tn.TokenHeaders(user),
				Body: map[string]any{"grantType": "client_credentials"}})
			require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
			return r.String(t, "data.accessToken")
		}},
	}
	for _, e := range envs {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			env := testsuite.Start(t, e.opts...)
			env.RequireBuiltinIssuer(t)
			for _, m := range mints {
				t.Run(m.name, func(t *testing.T) {
					tn := env.NewTenant(t)
					owner := tn.Token(t, testsuite.RoleOwner)
					user := testsuite.RolePrescriber
					setDisabled := func(t testing.TB, op string) {
						t.Helper()
						r := callPartner(t, env, tn, http.MethodPut, userPath(tn, user)+"/"+op, owner, nil)
						require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
					}
					validate := func(t *testing.T, token string, status int) {
						t.Helper()
						sc := testsuite.Scenario{Path: tn.ValidatePath(), Token: token, Headers: tn.Headers(), Status: status}
						if status != http.StatusOK {
							sc.Slug = slugAuth
							sc.NotContains = []string{`"validated"`}
						}
						testsuite.RunScenario(t, env, sc)
					}

					before := m.mint(t, env, tn, user)
					validate(t, before, http.StatusOK)
					setDisabled(t, "disable")
					setDisabled(t, "enable")
					between := m.mint(t, env, tn, user)
					t.Run("minted right after the enable", func(t *testing.T) { validate(t, between, http.StatusOK) })
					t.Run("minted before the disable", func(t *testing.T) { validate(t, before, http.StatusUnauthorized) })

					setDisabled(t, "disable")
					setDisabled(t, "enable")
					after := m.mint(t, env, tn, user)
					t.Run("minted right after the second enable", func(t *testing.T) { validate(t, after, http.StatusOK) })
					t.Run("minted between the first enable and the second disable", func(t *testing.T) {
						validate(t, between, http.StatusUnauthorized)
					})
					t.Run("minted before the first disable", func(t *testing.T) { validate(t, before, http.StatusUnauthorized) })
				})
			}
		})
	}
}
