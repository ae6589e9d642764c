package testsuite_test

import (
	"net/http"
	"testing"

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
