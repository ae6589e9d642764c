package auth_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// TestJWKSRedirectRefused checks that the JWKS client follows no redirect: an IdP answering
// 302 to another server that serves its own key (under the real kid and under a kid of its
// own) cannot make the verifier accept tokens signed by that key, and the failure is
// reported without the URL's query or the redirect's target.
func TestJWKSRedirectRefused(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	idp := fake.NewIdP(t, fake.WithKeys(keys.rsa))
	sameKid := fake.RSAKey(t, 2, keys.rsa.ID) // the attacker's key under the IdP's kid
	ownKid := fake.RSAKey(t, 2, "attacker")
	attacker := fake.NewIdP(t, fake.WithKeys(sameKid, ownKid))
	idp.RedirectTo(attacker.URL + "?from=idp")
	clock := newClock()
	const secret = "s3cr3t-of-the-idp"
	v := newVerifier(t, idp.URL+"?client_secret="+secret, clock, func(c *auth.VerifierConfig) {
		c.Leeway = 24 * time.Hour // the clock moves by hours here; keep the tokens valid
	})

	err := v.Ready(t.Context())
	require.Error(t, err)
	require.ErrorContains(t, err, "redirect")
	require.NotContains(t, err.Error(), secret)
	attackerURL, perr := url.Parse(attacker.URL)
	require.NoError(t, perr)
	require.NotContains(t, err.Error(), attackerURL.Host)
	t.Logf("not ready: %v", err)

	tests := []struct {
		name  string
		token string
	}{
		{name: "redirected-to key under the real kid", token: sameKid.Sign(t, claims("user-1"))},
		{name: "redirected-to key under its own kid", token: ownKid.Sign(t, claims("user-2"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock.Advance(time.Hour) // past any fetch interval: the refusal is not a rate limit
			_, err := v.Verify(t.Context(), tt.token)
			requireInvalid(t, err, tt.token)
		})
	}
	require.Zero(t, attacker.Fetches(), "the redirect was followed")
	require.Positive(t, idp.Fetches())

	t.Run("the real key once the IdP answers itself", func(t *testing.T) {
		idp.RedirectTo("")
		clock.Advance(time.Hour)
		token := keys.rsa.Sign(t, claims("user-3"))
		p, err := v.Verify(t.Context(), token)
		require.NoError(t, err)
		require.Equal(t, "user-3", p.UserID)
	})
}

// TestJWKSClientLeavesCallerClientAlone checks that refusing redirects does not change the
// redirect policy of a client the caller passed in.
func TestJWKSClientLeavesCallerClientAlone(t *testing.T) {
	t.Parallel()
	client := &http.Client{Timeout: time.Second}
	idp := fake.NewIdP(t)
	_ = newVerifier(t, idp.URL, newClock(), func(c *auth.VerifierConfig) { c.HTTPClient = client })
	require.Nil(t, client.CheckRedirect)
}
