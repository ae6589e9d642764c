package auth_test

import (
	"maps"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// TestFastPathAgreesWithFullPath: for tokens of every shape, well-formed
// or not, the verifier with its fast path (fastverify.go) answers exactly
// what it answers with the full jwx path alone: the same principal, or a
// refusal with the same reason.
func TestFastPathAgreesWithFullPath(t *testing.T) {
	rs, ec, ed := fake.RSAKey(t, 3, "rs"), fake.ECKey(t, "ec"), fake.EdKey(t, "ed")
	ps := fake.NewKey(t, "ps", jwa.PS256, "", rs.Private)
	idp := fake.NewIdP(t, fake.WithKeys(rs, ec, ed, ps))
	clock := newClock()
	verifiers := map[bool]*auth.Verifier{}
	for _, fast := range []bool{true, false} {
		v := newVerifier(t, idp.URL, clock, func(c *auth.VerifierConfig) { c.CacheSize = -1 })
		auth.SetFastPath(v, fast)
		require.NoError(t, v.Ready(t.Context()))
		verifiers[fast] = v
	}
	with := func(mod func(map[string]any)) map[string]any {
		c := maps.Clone(claims("user-1"))
		mod(c)
		return c
	}
	kid := func(k string) map[string]any { return map[string]any{"kid": k} }
	other := fake.ECKey(t, "ec") // same kid, another key: a forged signature
	tokens := map[string]string{
		"RS256":                 rs.Sign(t, claims("user-1")),
		"ES256":                 ec.Sign(t, claims("user-1")),
		"EdDSA":                 ed.Sign(t, claims("user-1")),
		"PS256 (full path)":     ps.Sign(t, claims("user-1")),
		"forged":                other.Sign(t, claims("user-1")),
		"unknown kid":           rs.SignAs(t, jwa.RS256, kid("nope"), claims("user-1")),
		"no kid":                rs.SignAs(t, jwa.RS256, map[string]any{"kid": ""}, claims("user-1")),
		"crit":                  rs.SignAs(t, jwa.RS256, map[string]any{"kid": "rs", "crit": []string{"exp"}, "exp": 1}, claims("user-1")),
		"extra header":          rs.SignAs(t, jwa.RS256, map[string]any{"kid": "rs", "x5t": "abc"}, claims("user-1")),
		"alg mismatch":          rs.SignAs(t, jwa.RS384, kid("rs"), claims("user-1")),
		"wrong issuer":          rs.Sign(t, with(func(c map[string]any) { c["iss"] = "https://evil.test/" })),
		"issuer not a string":   rs.Sign(t, with(func(c map[string]any) { c["iss"] = 7 })),
		"wrong audience":        rs.Sign(t, with(func(c map[string]any) { c["aud"] = "someone-else" })),
		"audience string":       rs.Sign(t, with(func(c map[string]any) { c["aud"] = testAudience })),
		"audience among":        rs.Sign(t, with(func(c map[string]any) { c["aud"] = []string{"x", testAudience} })),
		"no sub":                rs.Sign(t, with(func(c map[string]any) { delete(c, "sub") })),
		"empty sub":             rs.Sign(t, with(func(c map[string]any) { c["sub"] = "" })),
		"no exp":                rs.Sign(t, with(func(c map[string]any) { delete(c, "exp") })),
		"expired":               rs.Sign(t, with(func(c map[string]any) { c["exp"] = t0.Add(-time.Hour).Unix() })),
		"expired in leeway":     rs.Sign(t, with(func(c map[string]any) { c["exp"] = t0.Add(-30 * time.Second).Unix() })),
		"fractional exp":        rs.Sign(t, with(func(c map[string]any) { c["exp"] = float64(t0.Add(time.Hour).Unix()) + 0.5 })),
		"string exp":            rs.Sign(t, with(func(c map[string]any) { c["exp"] = "1900000000" })),
		"nbf ahead":             rs.Sign(t, with(func(c map[string]any) { c["nbf"] = t0.Add(time.Hour).Unix() })),
		"nbf in leeway":         rs.Sign(t, with(func(c map[string]any) { c["nbf"] = t0.Add(30 * time.Second).Unix() })),
		"iat ahead":             rs.Sign(t, with(func(c map[string]any) { c["iat"], c["nbf"] = t0.Add(time.Hour).Unix(), t0.Unix() })),
		"no iat nor nbf":        rs.Sign(t, with(func(c map[string]any) { delete(c, "iat"); delete(c, "nbf") })),
		"scope array":           rs.Sign(t, with(func(c map[string]any) { c["scope"] = []string{"a b", "c"} })),
		"scope not a string":    rs.Sign(t, with(func(c map[string]any) { c["scope"] = 5 })),
		"org_id not a string":   rs.Sign(t, with(func(c map[string]any) { c["org_id"] = 5 })),
		"jti not a string":      rs.Sign(t, with(func(c map[string]any) { c["jti"] = 5 })),
		"extra claims":          rs.Sign(t, with(func(c map[string]any) { c["email"], c["azp"] = "a@b.test", []any{1, "x"} })),
		"payload not JSON":      rs.SignPayload(t, jwa.RS256, kid("rs"), []byte("not json")),
		"payload JSON array":    rs.SignPayload(t, jwa.RS256, kid("rs"), []byte(`[1,2]`)),
		"payload JSON null":     rs.SignPayload(t, jwa.RS256, kid("rs"), []byte(`null`)),
		"duplicate iss":         rs.SignPayload(t, jwa.RS256, kid("rs"), []byte(`{"iss":"https://evil.test/","iss":"`+testIssuer+`","aud":"`+testAudience+`","sub":"u","exp":1785589200}`)),
		"case variant claim":    rs.SignPayload(t, jwa.RS256, kid("rs"), []byte(`{"ISS":"`+testIssuer+`","aud":"`+testAudience+`","sub":"u","exp":1785589200}`)),
		"exponent exp":          rs.SignPayload(t, jwa.RS256, kid("rs"), []byte(`{"iss":"`+testIssuer+`","aud":"`+testAudience+`","sub":"u","exp":1.7e9}`)),
		"alg none":              fake.Compact(t, map[string]any{"alg": "none", "kid": "rs"}, claims("user-1"), func(string) []byte { return []byte("x") }),
		"header alg not string": fake.Compact(t, map[string]any{"alg": 256, "kid": "rs"}, claims("user-1"), func(string) []byte { return []byte("x") }),
	}
	for name, token := range tokens {
		t.Run(name, func(t *testing.T) {
			pf, errFast := verifiers[true].Verify(t.Context(), token)
			ps, errFull := verifiers[false].Verify(t.Context(), token)
			if errFull != nil {
				require.Error(t, errFast, "the fast path accepted a token the full path refuses: %v", errFull)
				require.Equal(t, errFull.Error(), errFast.Error())
				return
			}
			require.NoError(t, errFast)
			require.Equal(t, ps, pf)
		})
	}
}
