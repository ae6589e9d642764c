package auth_test

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
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

// TestJWKSFetchesLimited checks that JWKS fetches are limited whoever asks, also while no
// usable key is loaded: bursts of concurrent readiness checks and token checks share one
// fetch, a fetch that leaves no usable key is followed by a backoff from a second, doubling
// up to MinRefresh, and once the IdP serves a key again a token is accepted after the
// interval. The fetches are counted at the IdP.
func TestJWKSFetchesLimited(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	idp := fake.NewIdP(t, fake.WithKeys(keys.rsa))
	idp.SetFailure(fake.Unavailable)
	clock := newClock()
	// MinRefresh is an hour so that jwk.Cache never refreshes in the background during the
	// test; the leeway keeps the tokens valid while the clock moves by hours.
	const minRefresh = time.Hour
	v := newVerifier(t, idp.URL, clock, func(c *auth.VerifierConfig) {
		c.MinRefresh = minRefresh
		c.Leeway = 24 * time.Hour
	})
	token := keys.rsa.Sign(t, claims("user-1"))
	stranger := keys.ec.Sign(t, claims("user-2")) // its key is never published

	// burst runs n readiness checks and n checks of token at once, and returns how many
	// tokens were accepted.
	const n = 16
	burst := func(token string) int {
		var (
			wg       sync.WaitGroup
			accepted atomic.Int64
		)
		for range n {
			wg.Go(func() { _ = v.Ready(t.Context()) })
			wg.Go(func() {
				if _, err := v.Verify(t.Context(), token); err == nil {
					accepted.Add(1)
				}
			})
		}
		wg.Wait()
		return int(accepted.Load())
	}

	// Steps run in order; each advances the clock first.
	type step struct {
		name      string
		advance   time.Duration
		heal      bool // the IdP serves its key from this step on
		token     string
		wantOK    bool // every token of the burst is accepted
		wantFetch int64
	}
	steps := []step{{name: "first burst shares one fetch", token: token, wantFetch: 1}}
	fetches := int64(1)
	// While the IdP fails, the interval doubles from a second up to MinRefresh.
	for backoff := time.Second; ; backoff *= 2 {
		backoff = min(backoff, minRefresh)
		steps = append(steps,
			step{name: fmt.Sprintf("%s after a failure, not yet", backoff), advance: backoff - time.Millisecond, token: token, wantFetch: fetches},
			step{name: fmt.Sprintf("%s after a failure", backoff), advance: time.Millisecond, token: token, wantFetch: fetches + 1})
		fetches++
		if backoff == minRefresh {
			break
		}
	}
	steps = append(steps,
		step{name: "IdP back, interval not over", advance: minRefresh - time.Millisecond, heal: true, token: token, wantFetch: fetches},
		step{name: "IdP back, after the interval", advance: time.Millisecond, token: token, wantOK: true, wantFetch: fetches + 1},
		step{name: "unknown kid with a key loaded", advance: time.Second, token: stranger, wantFetch: fetches + 1},
		step{name: "unknown kid after min refresh", advance: minRefresh - time.Second, token: stranger, wantFetch: fetches + 2},
	)
	for _, st := range steps {
		ok := t.Run(st.name, func(t *testing.T) {
			clock.Advance(st.advance)
			if st.heal {
				idp.SetFailure(fake.Healthy)
			}
			accepted := burst(st.token)
			require.Equal(t, st.wantFetch, idp.Fetches(), "jwks fetches")
			if st.wantOK {
				require.Equal(t, n, accepted)
				require.NoError(t, v.Ready(t.Context()))
			} else {
				require.Zero(t, accepted)
			}
		})
		require.True(t, ok)
	}
}
