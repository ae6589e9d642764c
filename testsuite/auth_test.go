package testsuite_test

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/fake"
)

const slugAuth = "authentication-required"

// authEnv starts a server that trusts a fake.IdP (built-in issuer off), with
// the IdP minting for the server's issuer and audience.
func authEnv(t testing.TB, opts ...testsuite.Option) (*testsuite.Env, *fake.IdP) {
	t.Helper()
	idp := fake.NewIdP(t, fake.WithES256())
	env := testsuite.Start(t, append([]testsuite.Option{testsuite.WithJWKS(idp.URL)}, opts...)...)
	idp.Issuer, idp.Audience = env.Issuer, env.Audience
	return env, idp
}

// TestAuthMatrix runs the authentication matrix of issue 2 against the
// partner validate operation, with tokens from an external identity
// provider. Every refusal is 401 authentication-required. (The disabled-user
// row needs an operator or partner disable endpoint, which does not exist
// yet; see the testsuite report.)
func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	env, idp := authEnv(t)
	a, b := env.NewTenant(t), env.NewTenant(t)
	userA, userB := a.Users[testsuite.RolePrescriber], b.Users[testsuite.RolePrescriber]
	claims := idp.Claims(userA, a.OrgID, "read:patient_prescription")
	now := idp.Now().Unix()
	secretA, secretB := a.Headers(), b.Headers()

	// Rows refused for B's organization must not reveal anything of B.
	notB := []string{b.OrgName, `"validated":`, `"data"`}

	type row struct {
		name    string
		path    string
		token   string
		headers map[string]string
		status  int
		hide    []string // substrings the answer must not hold
	}
	tests := []row{
		{name: "valid RS256 token", path: a.ValidatePath(), token: idp.Mint(claims), headers: secretA, status: http.StatusOK},
		{name: "valid ES256 token", path: a.ValidatePath(), token: idp.Mint(claims, fake.WithAlg("ES256")), headers: secretA, status: http.StatusOK},
		{name: "valid token without org_id claim", path: a.ValidatePath(), token: idp.Mint(fake.Without(claims, "org_id")),
			headers: secretA, status: http.StatusOK},

		{name: "expired a moment ago, within the leeway", path: a.ValidatePath(),
			token: idp.Mint(merge(claims, map[string]any{"exp": now - 5})), headers: secretA, status: http.StatusOK},
		{name: "valid in a moment, within the leeway", path: a.ValidatePath(),
			token: idp.Mint(merge(claims, map[string]any{"nbf": now + 5, "iat": now + 5})), headers: secretA, status: http.StatusOK},
		{name: "audience list holding the audience", path: a.ValidatePath(),
			token: idp.Mint(merge(claims, map[string]any{"aud": []string{"another-api", env.Audience}})), headers: secretA, status: http.StatusOK},

		{name: "no token", path: a.ValidatePath(), headers: secretA, status: http.StatusUnauthorized},
		{name: "empty bearer", path: a.ValidatePath(), headers: merge(secretA, map[string]string{"Authorization": "Bearer "}), status: http.StatusUnauthorized},
		{name: "basic scheme", path: a.ValidatePath(), headers: merge(secretA, map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}), status: http.StatusUnauthorized},
		{name: "token without scheme", path: a.ValidatePath(), headers: merge(secretA, map[string]string{"Authorization": idp.Mint(claims)}), status: http.StatusUnauthorized},
		{name: "expired", path: a.ValidatePath(), token: idp.Expired(claims), headers: secretA, status: http.StatusUnauthorized},
		{name: "not yet valid", path: a.ValidatePath(), token: idp.NotYetValid(claims), headers: secretA, status: http.StatusUnauthorized},
		{name: "wrong issuer", path: a.ValidatePath(), token: idp.WrongIssuer(claims), headers: secretA, status: http.StatusUnauthorized},
		{name: "wrong audience", path: a.ValidatePath(), token: idp.WrongAudience(claims), headers: secretA, status: http.StatusUnauthorized},
		{name: "alg none", path: a.ValidatePath(), token: idp.AlgNone(claims, false), headers: secretA, status: http.StatusUnauthorized},
		{name: "alg none with a signature segment", path: a.ValidatePath(), token: idp.AlgNone(claims, true), headers: secretA, status: http.StatusUnauthorized},
		{name: "HS256 keyed with the public key PEM", path: a.ValidatePath(), token: idp.HS256WithPublicKey(claims, fake.PublicKeyPEM),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "HS256 keyed with the public key DER", path: a.ValidatePath(), token: idp.HS256WithPublicKey(claims, fake.PublicKeyDER),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "HS256 keyed with the public key PKCS1 PEM", path: a.ValidatePath(), token: idp.HS256WithPublicKey(claims, fake.PublicKeyPKCS1PEM),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "HS256 keyed with the public JWK", path: a.ValidatePath(), token: idp.HS256WithPublicKey(claims, fake.PublicKeyJWK),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "unknown kid", path: a.ValidatePath(), token: idp.UnknownKid(claims), headers: secretA, status: http.StatusUnauthorized},
		{name: "no kid", path: a.ValidatePath(), token: idp.Mint(claims, fake.WithKeyID("")), headers: secretA, status: http.StatusUnauthorized},
		{name: "ES256 signature under the RSA kid", path: a.ValidatePath(), token: idp.Mint(claims, fake.WithAlg("ES256"), fake.WithKeyID(fake.RSAKeyID)),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "tampered payload", path: a.ValidatePath(), token: idp.Tampered(idp.Claims(uuid.NewString(), a.OrgID), claims),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "issued in the future", path: a.ValidatePath(),
			token: idp.Mint(merge(claims, map[string]any{"iat": now + 3600, "nbf": now + 3600, "exp": now + 7200})), headers: secretA, status: http.StatusUnauthorized},
		{name: "empty audience list", path: a.ValidatePath(), token: idp.Mint(merge(claims, map[string]any{"aud": []string{}})),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "unknown critical header", path: a.ValidatePath(), token: idp.Mint(claims, fake.WithHeader("crit", []string{"exp"})),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "key embedded in the header under an unpublished kid", path: a.ValidatePath(),
			token: idp.Mint(claims, fake.WithAlg("ES256"), fake.WithKeyID("attacker"),
				fake.WithHeader("jwk", idp.PublicJWK("ES256", "attacker"))),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "key set URL in the header under an unpublished kid", path: a.ValidatePath(),
			token:   idp.Mint(claims, fake.WithKeyID("attacker"), fake.WithHeader("jku", idp.URL)),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "org_id claim that is not a string", path: a.ValidatePath(),
			token: idp.Mint(merge(claims, map[string]any{"org_id": []string{a.OrgID}})), headers: secretA, status: http.StatusUnauthorized},
		{name: "missing sub", path: a.ValidatePath(), token: idp.Mint(fake.Without(claims, "sub")), headers: secretA, status: http.StatusUnauthorized},
		{name: "missing exp", path: a.ValidatePath(), token: idp.Mint(fake.Without(claims, "exp")), headers: secretA, status: http.StatusUnauthorized},
		{name: "unknown user", path: a.ValidatePath(), token: idp.Mint(idp.Claims(uuid.NewString(), a.OrgID)), headers: secretA, status: http.StatusUnauthorized},

		{name: "user of another organization with its own secret", path: b.ValidatePath(), token: idp.Mint(claims),
			headers: secretA, status: http.StatusUnauthorized, hide: notB},
		{name: "user of another organization without org_id, with that organization's secret", path: b.ValidatePath(),
			token: idp.Mint(fake.Without(claims, "org_id")), headers: secretB, status: http.StatusUnauthorized, hide: notB},
		{name: "user of another organization claiming it", path: b.ValidatePath(), token: idp.Mint(idp.Claims(userA, b.OrgID)),
			headers: secretB, status: http.StatusUnauthorized, hide: notB},
		{name: "unknown organization", path: "/v1/organizations/" + uuid.NewString() + "/validate", token: idp.Mint(claims),
			headers: secretA, status: http.StatusUnauthorized},

		{name: "missing organization secret", path: a.ValidatePath(), token: idp.Mint(claims), status: http.StatusUnauthorized},
		{name: "empty organization secret", path: a.ValidatePath(), token: idp.Mint(claims),
			headers: map[string]string{testsuite.HeaderOrganizationSecret: ""}, status: http.StatusUnauthorized},
		{name: "wrong organization secret", path: a.ValidatePath(), token: idp.Mint(claims),
			headers: map[string]string{testsuite.HeaderOrganizationSecret: "wrong-" + a.OrgSecret}, status: http.StatusUnauthorized},
		{name: "another organization's secret", path: a.ValidatePath(), token: idp.Mint(claims), headers: secretB, status: http.StatusUnauthorized},

		{name: "org_id claim naming another organization", path: a.ValidatePath(), token: idp.Mint(idp.Claims(userA, b.OrgID)),
			headers: secretA, status: http.StatusUnauthorized},
		{name: "org_id claim of the user's organization on another's path", path: b.ValidatePath(), token: idp.Mint(idp.Claims(userB, a.OrgID)),
			headers: secretB, status: http.StatusUnauthorized, hide: notB},
	}
	garbage := fake.GarbageTokens()
	for _, name := range slices.Sorted(maps.Keys(garbage)) {
		tests = append(tests, row{name: "malformed: " + name, path: a.ValidatePath(), token: garbage[name], headers: secretA, status: http.StatusUnauthorized})
	}

	scenarios := make([]testsuite.Scenario, 0, len(tests))
	for _, tt := range tests {
		sc := testsuite.Scenario{Name: tt.name, Path: tt.path, Token: tt.token, Headers: tt.headers, Status: tt.status, NotContains: tt.hide}
		if tt.status == http.StatusOK {
			sc.Check = func(t testing.TB, r *testsuite.Response) {
				assert.Equal(t, a.OrgID, r.String(t, "data.organization_id"))
				v, _ := r.Get("data.validated")
				assert.Equal(t, true, v)
			}
		} else {
			sc.Slug = slugAuth
		}
		scenarios = append(scenarios, sc)
	}
	testsuite.RunScenarios(t, env, scenarios)

	t.Run("refused calls did not validate the other organization", func(t *testing.T) {
		r := env.MustAdmin(t, http.MethodGet, b.OrgPath(), nil, http.StatusOK)
		v, _ := r.Get("data.validated")
		assert.Equal(t, false, v)
	})
}

// merge returns a new map holding the members of a and b, b winning.
func merge[K comparable, V any](a, b map[K]V) map[K]V {
	out := make(map[K]V, len(a)+len(b))
	maps.Copy(out, a)
	maps.Copy(out, b)
	return out
}

// TestAuthRotatedOrganizationSecret checks that after a rotation the old
// organization secret is refused at once, even with a token the server has
// already verified (and may remember), and the new one works.
func TestAuthRotatedOrganizationSecret(t *testing.T) {
	t.Parallel()
	env, idp := authEnv(t)
	tn := env.NewTenant(t)
	token := idp.Mint(idp.Claims(tn.Users[testsuite.RoleAdmin], tn.OrgID))
	call := func(t testing.TB, secret string) *testsuite.Response {
		t.Helper()
		r := env.Do(t, testsuite.Request{URL: tn.ValidatePath(), Token: token,
			Headers: map[string]string{testsuite.HeaderOrganizationSecret: secret}})
		env.CheckEnvelope(t, r)
		return r
	}

	require.Equal(t, http.StatusOK, call(t, tn.OrgSecret).Status, "before the rotation")
	old := tn.RotateOrgSecret(t)

	tests := []struct {
		name   string
		secret string
		want   int
	}{
		{name: "old secret", secret: old, want: http.StatusUnauthorized},
		{name: "new secret", secret: tn.OrgSecret, want: http.StatusOK},
		{name: "old secret again", secret: old, want: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, tt.secret)
			assert.Equal(t, tt.want, r.Status, "body: %s", r.Body)
			if tt.want == http.StatusUnauthorized {
				assert.Equal(t, slugAuth, r.Slug())
			}
		})
	}
}

// TestAuthExpiryWhileRemembered checks that a token verified once (and
// remembered by the server) is refused as soon as it expires.
func TestAuthExpiryWhileRemembered(t *testing.T) {
	t.Parallel()
	clock := fake.NewClock(time.Now().UTC().Truncate(time.Second))
	env, idp := authEnv(t, testsuite.WithNow(clock.Now))
	idp.Now = clock.Now
	tn := env.NewTenant(t)
	claims := idp.Claims(tn.Users[testsuite.RolePrescriber], tn.OrgID)
	claims["exp"] = clock.Now().Add(10 * time.Minute).Unix()
	token := idp.Mint(claims)
	leeway := env.Config.Auth.Leeway

	tests := []struct {
		name    string
		advance time.Duration
		want    int
	}{
		{name: "fresh", want: http.StatusOK},
		{name: "remembered", want: http.StatusOK},
		{name: "just before exp plus leeway", advance: 10*time.Minute + leeway - time.Second, want: http.StatusOK},
		{name: "at exp plus leeway", advance: time.Second, want: http.StatusUnauthorized},
		{name: "long after", advance: time.Hour, want: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock.Advance(tt.advance)
			testsuite.RunScenario(t, env, testsuite.Scenario{Path: tn.ValidatePath(), Token: token, Headers: tn.Headers(), Status: tt.want})
		})
	}
}

// TestAuthValidateRepeated checks that the validate operation marks the
// organization validated, and that repeating it is harmless: validated_at
// keeps its first value.
func TestAuthValidateRepeated(t *testing.T) {
	t.Parallel()
	env, idp := authEnv(t)
	tn := env.NewTenant(t)
	token := idp.Mint(idp.Claims(tn.Users[testsuite.RoleMember], tn.OrgID))

	var first string
	tests := []struct{ name string }{{"first"}, {"second"}, {"third"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			testsuite.RunScenario(t, env, testsuite.Scenario{Path: tn.ValidatePath(), Token: token, Headers: tn.Headers(), Status: http.StatusOK,
				Check: func(t testing.TB, r *testsuite.Response) {
					at := r.String(t, "data.validated_at")
					_, err := time.Parse(time.RFC3339Nano, at)
					require.NoError(t, err, "validated_at")
					if first == "" {
						first = at
					}
					assert.Equal(t, first, at, "validated_at changed on a repeated call")
				}})
		})
	}
	r := env.MustAdmin(t, http.MethodGet, tn.OrgPath(), nil, http.StatusOK)
	v, _ := r.Get("data.validated")
	assert.Equal(t, true, v, "the operator API shows the organization validated")
}

// TestAuthBuiltinIssuer checks that tokens of the built-in issuer (minted
// through the operator API and verified through the server's own JWKS) work
// on their organization only, and stop with a rotated secret. It also runs
// against a running instance.
func TestAuthBuiltinIssuer(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	env.RequireBuiltinIssuer(t)
	a, b := env.NewTenant(t), env.NewTenant(t)
	tokenA := a.Token(t, testsuite.RolePrescriber, "read:patient_prescription")
	ownerA := a.Token(t, testsuite.RoleOwner)

	tests := []testsuite.Scenario{
		{Name: "own organization", Path: a.ValidatePath(), Token: tokenA, Headers: a.Headers(), Status: http.StatusOK},
		{Name: "owner token with every scope", Path: a.ValidatePath(), Token: ownerA, Headers: a.Headers(), Status: http.StatusOK},
		{Name: "another organization with its secret", Path: b.ValidatePath(), Token: tokenA, Headers: b.Headers(),
			Status: http.StatusUnauthorized, Slug: slugAuth, NotContains: []string{b.OrgName}},
		{Name: "another organization with the token's secret", Path: b.ValidatePath(), Token: tokenA, Headers: a.Headers(),
			Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "forged with the server's kid", Path: a.ValidatePath(), Headers: a.Headers(), Status: http.StatusUnauthorized, Slug: slugAuth,
			Token: forgeWithKidOf(t, tokenA)},
	}
	testsuite.RunScenarios(t, env, tests)

	t.Run("rotated secret", func(t *testing.T) {
		old := a.RotateOrgSecret(t)
		testsuite.RunScenarios(t, env, []testsuite.Scenario{
			{Name: "old", Path: a.ValidatePath(), Token: tokenA, Headers: map[string]string{testsuite.HeaderOrganizationSecret: old},
				Status: http.StatusUnauthorized, Slug: slugAuth},
			{Name: "new", Path: a.ValidatePath(), Token: tokenA, Headers: a.Headers(), Status: http.StatusOK},
		})
	})
}

// forgeWithKidOf returns a token with token's claims, signed by a fake.IdP's
// key (which the server does not trust) under token's kid.
func forgeWithKidOf(t testing.TB, token string) string {
	t.Helper()
	idp := fake.NewIdP(t)
	header := strings.SplitN(token, ".", 2)[0]
	raw, err := base64.RawURLEncoding.DecodeString(header)
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.Unmarshal(raw, &h))
	kid, _ := h["kid"].(string)
	require.NotEmpty(t, kid, "the built-in issuer's tokens carry a kid")
	return idp.Mint(fake.PayloadOf(t, token), fake.WithKeyID(kid))
}
