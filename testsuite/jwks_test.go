package testsuite_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// TestJWKSRedirectNotFollowed checks over HTTP that the server does not
// follow a redirect from auth.jwks_url: when the IdP answers 302 to another
// server publishing its own key under the IdP's kid, a token signed by that
// key is refused, and the other server is never asked.
func TestJWKSRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	env, idp := authEnv(t)
	tn := env.NewTenant(t)
	forged := fake.NewKey(t, fake.RSAKeyID, jwa.RS256, jwa.RS256, fake.RSAPrivateKey(t, 1))
	attacker := fake.NewIdP(t, fake.WithKeys(forged))
	idp.RedirectTo(attacker.URL)
	claims := idp.Claims(tn.Users[testsuite.RolePrescriber], tn.OrgID)

	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{Name: "token of the redirected-to key", Path: tn.ValidatePath(), Token: forged.Sign(t, claims), Headers: tn.Headers(),
			Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "not ready", Path: env.PartnerURL + "/readyz", Status: http.StatusServiceUnavailable},
	})
	require.Zero(t, attacker.Fetches(), "the redirect was followed")
	require.Positive(t, idp.Fetches())
}

// TestJWKSFetchesBoundedOverHTTP checks over HTTP that anonymous /readyz
// requests and token checks arriving together while no key is loaded cause
// one JWKS fetch per interval, counted at the IdP, and that a token is
// accepted once the IdP is back and the interval (a backoff from a second)
// has passed.
func TestJWKSFetchesBoundedOverHTTP(t *testing.T) {
	t.Parallel()
	clock := fake.NewClock(time.Now().UTC().Truncate(time.Second))
	env, idp := authEnv(t, testsuite.WithNow(clock.Now))
	idp.Now = clock.Now
	tn := env.NewTenant(t)
	token := idp.Mint(idp.Claims(tn.Users[testsuite.RolePrescriber], tn.OrgID))
	idp.SetFailure(fake.Unavailable)

	// burst sends n /readyz requests and n token checks at once and
	// returns once all are answered, each with want (readyz: 503 or,
	// when want is 200, 200 or 503; a fetch may be running).
	const n = 12
	burst := func(t *testing.T, want int) {
		for i := range n {
			t.Run(fmt.Sprintf("readyz %d", i), func(t *testing.T) {
				t.Parallel()
				r := env.Do(t, testsuite.Request{URL: env.PartnerURL + "/readyz"})
				if want != http.StatusOK {
					require.Equal(t, http.StatusServiceUnavailable, r.Status)
				}
			})
			t.Run(fmt.Sprintf("token %d", i), func(t *testing.T) {
				t.Parallel()
				testsuite.RunScenario(t, env, testsuite.Scenario{Path: tn.ValidatePath(), Token: token, Headers: tn.Headers(), Status: want})
			})
		}
	}

	steps := []struct {
		name      string
		advance   time.Duration
		heal      bool
		want      int
		wantFetch int64
	}{
		{name: "one fetch for the first burst", want: http.StatusUnauthorized, wantFetch: 1},
		{name: "none within a second", advance: time.Second - time.Millisecond, want: http.StatusUnauthorized, wantFetch: 1},
		{name: "one after a second", advance: time.Millisecond, want: http.StatusUnauthorized, wantFetch: 2},
		{name: "IdP back, none within two seconds", advance: 2*time.Second - time.Millisecond, heal: true, want: http.StatusUnauthorized, wantFetch: 2},
		{name: "IdP back, accepted after two seconds", advance: time.Millisecond, want: http.StatusOK, wantFetch: 3},
	}
	for _, st := range steps {
		ok := t.Run(st.name, func(t *testing.T) {
			clock.Advance(st.advance)
			if st.heal {
				idp.SetFailure(fake.Healthy)
			}
			t.Run("burst", func(t *testing.T) { burst(t, st.want) })
			require.Equal(t, st.wantFetch, idp.Fetches(), "jwks fetches")
		})
		require.True(t, ok)
	}
	testsuite.RunScenario(t, env, testsuite.Scenario{Path: env.PartnerURL + "/readyz", Status: http.StatusOK})
}
