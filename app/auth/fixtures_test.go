package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/testsuite/fake"
)

const (
	testIssuer   = "https://idp.example.test/"
	testAudience = "rxgate-partner-api"
)

// t0 is the fake clock's start; tokens are issued relative to it.
var t0 = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

// newClock is a fake clock reading t0.
func newClock() *fake.Clock { return fake.NewClock(t0) }

// newVerifier builds a Verifier for the JWKS at jwksURL driven by clock, with MinRefresh an hour so that
// jwk.Cache never refreshes in the background during a test. mod adjusts the config.
func newVerifier(t testing.TB, jwksURL string, clock *fake.Clock, mod func(*auth.VerifierConfig)) *auth.Verifier {
	t.Helper()
	cfg := auth.VerifierConfig{
		JWKSURL:    jwksURL,
		Issuer:     testIssuer,
		Audience:   testAudience,
		Leeway:     time.Minute,
		MinRefresh: time.Hour,
		Now:        clock.Now,
	}
	if mod != nil {
		mod(&cfg)
	}
	v, err := auth.NewVerifier(t.Context(), cfg)
	require.NoError(t, err)
	return v
}

// claims returns valid claims issued at t0 for an hour.
func claims(sub string) map[string]any {
	return map[string]any{
		"iss":    testIssuer,
		"aud":    []string{testAudience},
		"sub":    sub,
		"org_id": "org-1",
		"scope":  "read:patient_prescription update:patient",
		"iat":    t0.Unix(),
		"nbf":    t0.Unix(),
		"exp":    t0.Add(time.Hour).Unix(),
		"jti":    "jti-" + sub,
	}
}

// requireInvalid asserts err is a verification failure whose message does not leak token.
func requireInvalid(t testing.TB, err error, token string) {
	t.Helper()
	require.ErrorIs(t, err, auth.ErrInvalidToken)
	msg := err.Error()
	t.Logf("refused: %s", msg)
	if token != "" {
		require.NotContains(t, msg, token)
	}
	for seg := range strings.SplitSeq(token, ".") {
		if len(seg) >= 16 {
			require.NotContains(t, msg, seg)
		}
	}
}
