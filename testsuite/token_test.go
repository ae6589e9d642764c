package testsuite_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/fake"
)

const tokenPath = "/v1/token"

// tokenBody is a well-formed /v1/token body asking for scopes.
func tokenBody(scopes ...string) map[string]any {
	return map[string]any{"grantType": "client_credentials", "scope": scopes}
}

// without returns a copy of headers without name.
func without(headers map[string]string, name string) map[string]string {
	out := merge(headers, nil)
	delete(out, name)
	return out
}

// scopeClaim splits a minted token's space-separated scope claim.
func scopeClaim(claims map[string]any) []string {
	s, _ := claims["scope"].(string)
	return strings.Fields(s)
}

// usableOn returns a Check that the answer's token works on tn's validate
// operation and carries exactly scopes.
func usableOn(env *testsuite.Env, tn *testsuite.Tenant, scopes ...string) func(testing.TB, *testsuite.Response) {
	return func(t testing.TB, r *testsuite.Response) {
		t.Helper()
		assert.Equal(t, "Bearer", r.String(t, "data.tokenType"))
		expiresIn, _ := r.Get("data.expiresIn")
		n, ok := expiresIn.(float64)
		assert.True(t, ok && n > 0, "expiresIn is %v, want a positive number", expiresIn)
		assert.ElementsMatch(t, scopes, r.Strings(t, "data.scope"))

		token := r.String(t, "data.accessToken")
		claims := fake.PayloadOf(t, token)
		assert.Equal(t, tn.OrgID, claims["org_id"])
		assert.ElementsMatch(t, scopes, scopeClaim(claims), "the token's scope claim")
		exp, _ := claims["exp"].(float64)
		iat, _ := claims["iat"].(float64)
		assert.InDelta(t, n, exp-iat, 1, "expiresIn matches the token's lifetime")
		testsuite.RunScenario(t, env, testsuite.Scenario{Path: tn.ValidatePath(), Token: token, Headers: tn.Headers(), Status: http.StatusOK})
	}
}

// TestTokenEndpoint checks POST {base_url}/v1/token with the built-in
// issuer: what is granted, and every way the request is refused.
func TestTokenEndpoint(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	env.RequireBuiltinIssuer(t)
	a := env.NewTenant(t)
	limited := env.NewTenant(t, testsuite.WithAllowedScopes("read:patient_prescription", "read:custom_drug"))
	other := env.NewTenant(t)
	sibling := env.NewTenant(t, testsuite.WithPartner(a.PartnerID, a.PartnerSecret))
	creds := a.TokenHeaders(testsuite.RolePrescriber)

	tests := []testsuite.Scenario{
		{Name: "granted as asked", Headers: creds, Body: tokenBody("read:patient_prescription", "update:patient"),
			Status: http.StatusOK, Check: usableOn(env, a, "read:patient_prescription", "update:patient")},
		{Name: "scope the organization does not allow is not granted", Headers: limited.TokenHeaders(testsuite.RoleAdmin),
			Body: tokenBody("update:patient", "read:patient_prescription"), Status: http.StatusOK,
			Check: usableOn(env, limited, "read:patient_prescription")},
		{Name: "unknown scope is not granted", Headers: creds, Body: tokenBody("read:custom_drug", "admin:everything"),
			Status: http.StatusOK, Check: usableOn(env, a, "read:custom_drug")},
		{Name: "nothing allowed asked", Headers: limited.TokenHeaders(testsuite.RoleMember), Body: tokenBody("update:user"),
			Status: http.StatusOK, Check: func(t testing.TB, r *testsuite.Response) {
				assert.Empty(t, r.Strings(t, "data.scope"))
			}},
		{Name: "another organization of the same partner", Headers: sibling.TokenHeaders(testsuite.RoleOwner), Body: tokenBody("READ_USER"),
			Status: http.StatusOK, Check: usableOn(env, sibling, "READ_USER")},
	}
	for _, h := range []string{"x-partner-id", "x-partner-secret", "x-organization-id", "x-organization-secret", "x-user-id"} {
		tests = append(tests,
			testsuite.Scenario{Name: "missing " + h, Headers: without(creds, h), Body: tokenBody("read:custom_drug"),
				Status: http.StatusUnauthorized, Slug: slugAuth},
			testsuite.Scenario{Name: "empty " + h, Headers: merge(creds, map[string]string{h: ""}), Body: tokenBody("read:custom_drug"),
				Status: http.StatusUnauthorized, Slug: slugAuth},
		)
	}
	refused := []struct {
		name    string
		headers map[string]string
	}{
		{"wrong partner secret", merge(creds, map[string]string{"x-partner-secret": "wrong-" + a.PartnerSecret})},
		{"wrong organization secret", merge(creds, map[string]string{"x-organization-secret": "wrong-" + a.OrgSecret})},
		{"unknown partner", merge(creds, map[string]string{"x-partner-id": uuid.NewString()})},
		{"partner id that is not a uuid", merge(creds, map[string]string{"x-partner-id": "acme"})},
		{"unknown organization", merge(creds, map[string]string{"x-organization-id": uuid.NewString()})},
		{"unknown user", merge(creds, map[string]string{"x-user-id": uuid.NewString()})},
		{"user of another organization", merge(creds, map[string]string{"x-user-id": other.Users[testsuite.RoleOwner]})},
		{"partner that does not own the organization", merge(creds, map[string]string{
			"x-partner-id": other.PartnerID, "x-partner-secret": other.PartnerSecret})},
		{"another organization's secret", merge(creds, map[string]string{"x-organization-secret": other.OrgSecret})},
		{"sibling organization's secret", merge(creds, map[string]string{"x-organization-secret": sibling.OrgSecret})},
	}
	for _, r := range refused {
		tests = append(tests, testsuite.Scenario{Name: r.name, Headers: r.headers, Body: tokenBody("read:custom_drug"),
			Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: []string{"accessToken"}})
	}
	tests = append(tests, []testsuite.Scenario{
		{Name: "grant type password", Headers: creds, Body: map[string]any{"grantType": "password", "scope": []string{"read:custom_drug"}},
			Status: http.StatusBadRequest},
		{Name: "grant type missing", Headers: creds, Body: map[string]any{"scope": []string{"read:custom_drug"}}, Status: http.StatusBadRequest},
		{Name: "grant type in another case", Headers: creds, Body: map[string]any{"grantType": "CLIENT_CREDENTIALS"}, Status: http.StatusBadRequest},
		{Name: "malformed JSON", Headers: creds, Body: `{"grantType": "client_credentials",`, Status: http.StatusBadRequest},
		{Name: "JSON array", Headers: creds, Body: `["client_credentials"]`, Status: http.StatusBadRequest},
		{Name: "scope of the wrong type", Headers: creds, Body: map[string]any{"grantType": "client_credentials", "scope": 7},
			Status: http.StatusBadRequest},
		{Name: "no body", Headers: creds, Status: http.StatusBadRequest},
		{Name: "text/plain body", Headers: merge(creds, map[string]string{"Content-Type": "text/plain"}),
			Body: tokenBody("read:custom_drug"), Status: http.StatusUnsupportedMediaType},
	}...)
	for i := range tests {
		if tests[i].Method == "" {
			tests[i].Method = http.MethodPost
		}
		tests[i].Path = tokenPath
	}
	tests = append(tests, testsuite.Scenario{Name: "GET is not allowed", Method: http.MethodGet, Path: tokenPath, Headers: creds,
		Status: http.StatusMethodNotAllowed, Slug: "method-not-allowed"})
	testsuite.RunScenarios(t, env, tests)
}

// TestTokenSecretRotation checks that rotating the partner or the
// organization secret stops the old one on /v1/token at once.
func TestTokenSecretRotation(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	env.RequireBuiltinIssuer(t)

	tests := []struct {
		name   string
		rotate func(testing.TB, *testsuite.Tenant) (header, old string)
	}{
		{name: "partner secret", rotate: func(t testing.TB, tn *testsuite.Tenant) (string, string) {
			return "x-partner-secret", tn.RotatePartnerSecret(t)
		}},
		{name: "organization secret", rotate: func(t testing.TB, tn *testsuite.Tenant) (string, string) {
			return "x-organization-secret", tn.RotateOrgSecret(t)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tn := env.NewTenant(t)
			issue := func(headers map[string]string, want int) {
				t.Helper()
				testsuite.RunScenario(t, env, testsuite.Scenario{Method: http.MethodPost, Path: tokenPath, Headers: headers,
					Body: tokenBody("read:custom_drug"), Status: want})
			}
			issue(tn.TokenHeaders(testsuite.RoleAdmin), http.StatusOK)
			header, old := tt.rotate(t, tn)
			issue(merge(tn.TokenHeaders(testsuite.RoleAdmin), map[string]string{header: old}), http.StatusUnauthorized)
			issue(tn.TokenHeaders(testsuite.RoleAdmin), http.StatusOK)
		})
	}
}

// TestTokenOperatorMint checks POST /admin/v1/tokens with the built-in
// issuer: it grants only what the organization allows, and its tokens work.
func TestTokenOperatorMint(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	env.RequireBuiltinIssuer(t)
	tn := env.NewTenant(t, testsuite.WithAllowedScopes("read:patient_prescription", "update:patient"))
	user := tn.Users[testsuite.RolePrescriber]
	mint := env.AdminPath("/admin/v1/tokens")

	granted := func(want ...string) func(testing.TB, *testsuite.Response) {
		return func(t testing.TB, r *testsuite.Response) {
			t.Helper()
			assert.ElementsMatch(t, want, r.Strings(t, "data.scopes"))
			assert.Equal(t, "Bearer", r.String(t, "data.token_type"))
			token := r.String(t, "data.access_token")
			claims := fake.PayloadOf(t, token)
			assert.Equal(t, user, claims["sub"])
			assert.Equal(t, tn.OrgID, claims["org_id"])
			assert.Equal(t, env.Issuer, claims["iss"])
			assert.ElementsMatch(t, want, scopeClaim(claims), "the token's scope claim")
			testsuite.RunScenario(t, env, testsuite.Scenario{Path: tn.ValidatePath(), Token: token, Headers: tn.Headers(), Status: http.StatusOK})
		}
	}
	tests := []testsuite.Scenario{
		{Name: "only allowed scopes are granted", Method: http.MethodPost, Path: mint, Token: env.AdminKey,
			Body:   map[string]any{"organization_id": tn.OrgID, "user_id": user, "scopes": []string{"update:patient", "update:user", "read:patient_prescription"}},
			Status: http.StatusCreated, Check: granted("update:patient", "read:patient_prescription")},
		{Name: "no scopes asks for every allowed one", Method: http.MethodPost, Path: mint, Token: env.AdminKey,
			Body:   map[string]any{"organization_id": tn.OrgID, "user_id": user},
			Status: http.StatusCreated, Check: granted("read:patient_prescription", "update:patient")},
		{Name: "nothing allowed asked", Method: http.MethodPost, Path: mint, Token: env.AdminKey,
			Body:   map[string]any{"organization_id": tn.OrgID, "user_id": user, "scopes": []string{"READ_USER"}},
			Status: http.StatusCreated, Check: granted()},
		{Name: "not a partner scope", Method: http.MethodPost, Path: mint, Token: env.AdminKey,
			Body:   map[string]any{"organization_id": tn.OrgID, "user_id": user, "scopes": []string{"root"}},
			Status: http.StatusUnprocessableEntity, Slug: "validation-error"},
		{Name: "ttl out of range", Method: http.MethodPost, Path: mint, Token: env.AdminKey,
			Body:   map[string]any{"organization_id": tn.OrgID, "user_id": user, "ttl_seconds": -1},
			Status: http.StatusUnprocessableEntity, Slug: "validation-error"},
		{Name: "ttl is honoured", Method: http.MethodPost, Path: mint, Token: env.AdminKey,
			Body:   map[string]any{"organization_id": tn.OrgID, "user_id": user, "ttl_seconds": 120},
			Status: http.StatusCreated, Check: func(t testing.TB, r *testsuite.Response) {
				claims := fake.PayloadOf(t, r.String(t, "data.access_token"))
				exp, _ := claims["exp"].(float64)
				iat, _ := claims["iat"].(float64)
				assert.InDelta(t, 120, exp-iat, 1)
			}},
		{Name: "user of another organization", Method: http.MethodPost, Path: mint, Token: env.AdminKey,
			Body:   map[string]any{"organization_id": env.NewTenant(t).OrgID, "user_id": user},
			Status: http.StatusNotFound},
	}
	testsuite.RunScenarios(t, env, tests)
}

// TestTokenWithoutBuiltinIssuer checks that with an external identity
// provider the token endpoint and the server's JWKS do not exist, and the
// operator cannot mint.
func TestTokenWithoutBuiltinIssuer(t *testing.T) {
	t.Parallel()
	env, _ := authEnv(t)
	tn := env.NewTenant(t)

	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{Name: "token endpoint", Method: http.MethodPost, Path: tokenPath, Headers: tn.TokenHeaders(testsuite.RoleAdmin),
			Body: tokenBody("read:custom_drug"), Status: http.StatusNotFound, Slug: "not-found"},
		{Name: "server JWKS", Path: env.PartnerURL + "/.well-known/jwks.json", Status: http.StatusNotFound, Slug: "not-found"},
	})

	t.Run("operator mint is refused", func(t *testing.T) {
		r := env.Admin(t, http.MethodPost, "/admin/v1/tokens", map[string]any{"organization_id": tn.OrgID, "user_id": tn.Users[testsuite.RoleAdmin]})
		env.CheckEnvelope(t, r)
		require.GreaterOrEqual(t, r.Status, 400, "body: %s", r.Body)
		assert.NotContains(t, string(r.Body), "access_token")
	})
}
