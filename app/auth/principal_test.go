package auth_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// TestIssuedBeforeDisable checks the revocation rule of spec 3.2 on tokens as
// the verifier returns them: exact for the built-in issuer's tokens, whose
// disable stamp is trusted only under the issuer's own key, and by "iat" with
// the leeway for every other token.
func TestIssuedBeforeDisable(t *testing.T) {
	t.Parallel()
	const leeway = 30 * time.Second
	// The user was disabled at 12:00:00.4 and enabled again; the built-in
	// issuer mints at 12:00:00.5, so its tokens' "iat" is the disable's
	// second, whether they came before the disable or after the enable.
	disabledAt := t0.Add(400 * time.Millisecond)
	earlier := disabledAt.Add(-time.Hour) // a disable before that one

	priv := fake.RSAPrivateKey(t, 1)
	iss, err := auth.NewIssuer(privateJWK(t, priv), testIssuer, testAudience, fake.NewClock(t0.Add(500*time.Millisecond)).Now)
	require.NoError(t, err)
	// The built-in issuer's own key under its kid, to sign the tokens it
	// minted before it stamped them; and an identity provider configured
	// with the same issuer name, signing with a key of its own.
	own := fake.NewKey(t, iss.KeyID(), jwa.RS256, jwa.RS256, priv)
	idpKey := fake.RSAKey(t, 2, "idp-key")
	idp := fake.NewIdP(t, fake.WithKeys(own, idpKey))
	// The verifier reads its clock 40 s after the disable's second, so that
	// every token below is valid, the leeway's end included.
	v := newVerifier(t, idp.URL, fake.NewClock(t0.Add(40*time.Second)), func(c *auth.VerifierConfig) {
		c.Leeway = leeway
		c.Builtin = iss
	})

	mint := func(stamp time.Time) func(t testing.TB) string {
		return func(t testing.TB) string {
			token, _, err := iss.Mint(auth.MintRequest{UserID: "user-1", OrgID: "org-1", TTL: time.Hour, DisabledAt: stamp})
			require.NoError(t, err)
			return token
		}
	}
	// external signs claims issued at t0 plus iat with key, with the edits
	// kv (a nil value removes the claim).
	external := func(key fake.Key, iat time.Duration, kv ...any) func(t testing.TB) string {
		return func(t testing.TB) string {
			c := claims("user-1")
			c["iat"], c["nbf"] = t0.Add(iat).Unix(), t0.Add(iat).Unix()
			for i := 0; i < len(kv); i += 2 {
				if kv[i+1] == nil {
					delete(c, kv[i].(string))
				} else {
					c[kv[i].(string)] = kv[i+1]
				}
			}
			return key.Sign(t, c)
		}
	}

	tests := []struct {
		name       string
		token      func(t testing.TB) string
		disabledAt time.Time // the user's DisabledAt now; zero when never disabled
		want       bool
	}{
		{name: "built-in, user never disabled", token: mint(time.Time{}), want: false},
		{name: "built-in, minted before the disable, in its second", token: mint(time.Time{}), disabledAt: disabledAt, want: true},
		{name: "built-in, minted after the enable, in the disable's second", token: mint(disabledAt), disabledAt: disabledAt, want: false},
		{name: "built-in, minted after an enable, disabled again since", token: mint(earlier), disabledAt: disabledAt, want: true},
		// A token of the built-in issuer from before the stamp existed is
		// judged as any other, by "iat".
		{name: "built-in without a stamp, in the disable's second", token: external(own, 0), disabledAt: disabledAt, want: true},
		{name: "built-in without a stamp, past the leeway", token: external(own, 31*time.Second), disabledAt: disabledAt, want: false},
		// An identity provider's token: its "iat" may run ahead by the
		// leeway, so it must be more than the leeway after the disable's
		// second; a stamp claim it carries is not trusted (another key).
		{name: "external, user never disabled", token: external(idpKey, 0), want: false},
		{name: "external, within the leeway", token: external(idpKey, 20*time.Second), disabledAt: disabledAt, want: true},
		{name: "external, at the end of the leeway", token: external(idpKey, 30*time.Second), disabledAt: disabledAt, want: true},
		{name: "external, past the leeway", token: external(idpKey, 31*time.Second), disabledAt: disabledAt, want: false},
		{name: "external with a stamp claim, within the leeway", token: external(idpKey, 20*time.Second, "rxgate_disabled_at", disabledAt.UnixMicro()),
			disabledAt: disabledAt, want: true},
		{name: "external without iat", token: external(idpKey, 40*time.Second, "iat", nil), disabledAt: disabledAt, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := v.Verify(t.Context(), tt.token(t))
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.IssuedBeforeDisable(tt.disabledAt, leeway))
		})
	}
}

// TestDisableStampTrust checks which tokens get a disable stamp: the built-in
// issuer's, verified with its key, and no other.
func TestDisableStampTrust(t *testing.T) {
	t.Parallel()
	clock := newClock()
	disabledAt := time.Date(2026, 7, 30, 8, 15, 2, 123456000, time.UTC)
	priv := fake.RSAPrivateKey(t, 1)
	iss, err := auth.NewIssuer(privateJWK(t, priv), testIssuer, testAudience, clock.Now)
	require.NoError(t, err)
	// Another rxgate's built-in issuer, also trusted by the JWKS.
	other, err := auth.NewIssuer(privateJWK(t, fake.RSAPrivateKey(t, 2)), testIssuer, testAudience, clock.Now)
	require.NoError(t, err)
	idp := fake.NewIdP(t, fake.WithKeys(fake.NewKey(t, iss.KeyID(), jwa.RS256, jwa.RS256, priv),
		fake.NewKey(t, other.KeyID(), jwa.RS256, jwa.RS256, fake.RSAPrivateKey(t, 2))))

	mint := func(t testing.TB, i *auth.Issuer, stamp time.Time) string {
		token, _, err := i.Mint(auth.MintRequest{UserID: "user-1", TTL: time.Hour, DisabledAt: stamp})
		require.NoError(t, err)
		return token
	}
	zero := time.Time{}
	tests := []struct {
		name    string
		builtin *auth.Issuer
		token   func(t testing.TB) string
		want    *time.Time
	}{
		{name: "own token", builtin: iss, token: func(t testing.TB) string { return mint(t, iss, disabledAt) }, want: &disabledAt},
		{name: "own token, never disabled", builtin: iss, token: func(t testing.TB) string { return mint(t, iss, zero) }, want: &zero},
		{name: "another issuer's token", builtin: iss, token: func(t testing.TB) string { return mint(t, other, disabledAt) }},
		{name: "no built-in issuer", token: func(t testing.TB) string { return mint(t, iss, disabledAt) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, idp.URL, clock, func(c *auth.VerifierConfig) { c.Builtin = tt.builtin })
			p, err := v.Verify(t.Context(), tt.token(t))
			require.NoError(t, err)
			assert.Equal(t, tt.want, p.DisableStamp)
		})
	}
}

// privateJWK is priv as the JWK JSON auth.NewIssuer loads.
func privateJWK(t testing.TB, priv any) []byte {
	t.Helper()
	k, err := jwk.FromRaw(priv)
	require.NoError(t, err)
	buf, err := json.Marshal(k)
	require.NoError(t, err)
	return buf
}
