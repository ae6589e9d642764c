package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// keyring is the set of keys most tests publish.
type keyring struct {
	rsa, rsaNoAlg, ec, ed fake.Key
}

func newKeyring(t testing.TB) keyring {
	t.Helper()
	return keyring{
		rsa:      fake.RSAKey(t, 0, "rsa-1"),
		rsaNoAlg: fake.NewKey(t, "rsa-noalg", jwa.PS256, "", fake.RSAPrivateKey(t, 1)),
		ec:       fake.ECKey(t, "ec-1"),
		ed:       fake.EdKey(t, "ed-1"),
	}
}

func (k keyring) all() []fake.Key { return []fake.Key{k.rsa, k.rsaNoAlg, k.ec, k.ed} }

func TestVerify(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	idp := fake.NewIdP(t, fake.WithKeys(keys.all()...))

	with := func(edit func(c map[string]any)) map[string]any {
		c := claims("user-1")
		edit(c)
		return c
	}
	full := &auth.Principal{
		UserID:    "user-1",
		OrgID:     "org-1",
		Scopes:    []string{"read:patient_prescription", "update:patient"},
		ExpiresAt: t0.Add(time.Hour),
		IssuedAt:  t0,
		TokenID:   "jti-user-1",
	}
	withScopes := func(scopes ...string) *auth.Principal {
		p := *full
		p.Scopes = scopes
		return &p
	}

	tests := []struct {
		name       string
		token      func(t testing.TB) string
		scopeClaim string
		want       *auth.Principal // nil: the token must be refused
	}{
		{
			name:  "rs256 with scope string",
			token: func(t testing.TB) string { return keys.rsa.Sign(t, claims("user-1")) },
			want:  full,
		},
		{
			name:       "scopes from permissions array",
			scopeClaim: "permissions",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["permissions"] = []string{"read:custom_drug", "READ_USER"} }))
			},
			want: withScopes("read:custom_drug", "READ_USER"),
		},
		{
			name:       "scopes from scp array",
			scopeClaim: "scp",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["scp"] = []string{"update:user"} }))
			},
			want: withScopes("update:user"),
		},
		{
			name:       "scp as space-separated string",
			scopeClaim: "scp",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["scp"] = "update:user  create:custom_drug" }))
			},
			want: withScopes("update:user", "create:custom_drug"),
		},
		{
			name: "no scope claim and no org_id",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { delete(c, "scope"); delete(c, "org_id"); delete(c, "jti") }))
			},
			want: &auth.Principal{UserID: "user-1", ExpiresAt: t0.Add(time.Hour), IssuedAt: t0},
		},
		{
			name: "no iat",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { delete(c, "iat") }))
			},
			want: func() *auth.Principal { p := *full; p.IssuedAt = time.Time{}; return &p }(),
		},
		{
			name: "audience as a plain string",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["aud"] = testAudience }))
			},
			want: full,
		},
		{
			name: "audience among several",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["aud"] = []string{"other", testAudience} }))
			},
			want: full,
		},
		{name: "ps256", token: func(t testing.TB) string { return keys.rsaNoAlg.Sign(t, claims("user-1")) }, want: full},
		{name: "es256", token: func(t testing.TB) string { return keys.ec.Sign(t, claims("user-1")) }, want: full},
		{name: "eddsa", token: func(t testing.TB) string { return keys.ed.Sign(t, claims("user-1")) }, want: full},
		{
			name: "jwk without alg accepts any rsa algorithm",
			token: func(t testing.TB) string {
				return keys.rsaNoAlg.SignAs(t, jwa.RS512, map[string]any{"kid": "rsa-noalg"}, claims("user-1"))
			},
			want: full,
		},
		{
			name: "expired within leeway",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["exp"] = t0.Add(-30 * time.Second).Unix() }))
			},
			want: func() *auth.Principal { p := *full; p.ExpiresAt = t0.Add(-30 * time.Second); return &p }(),
		},
		{
			name: "not before within leeway",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["nbf"] = t0.Add(30 * time.Second).Unix() }))
			},
			want: full,
		},
		{
			name: "expired beyond leeway",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["exp"] = t0.Add(-61 * time.Second).Unix() }))
			},
		},
		{
			name: "exp zero",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["exp"] = 0 }))
			},
		},
		{
			name:  "missing exp",
			token: func(t testing.TB) string { return keys.rsa.Sign(t, with(func(c map[string]any) { delete(c, "exp") })) },
		},
		{
			name: "not yet valid",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["nbf"] = t0.Add(2 * time.Minute).Unix() }))
			},
		},
		{
			name: "issued in the future",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["iat"] = t0.Add(2 * time.Minute).Unix() }))
			},
		},
		{
			name: "wrong issuer",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["iss"] = "https://evil.test/" }))
			},
		},
		{
			name:  "missing issuer",
			token: func(t testing.TB) string { return keys.rsa.Sign(t, with(func(c map[string]any) { delete(c, "iss") })) },
		},
		{
			name: "wrong audience",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["aud"] = []string{"other"} }))
			},
		},
		{
			name:  "missing audience",
			token: func(t testing.TB) string { return keys.rsa.Sign(t, with(func(c map[string]any) { delete(c, "aud") })) },
		},
		{
			name:  "missing sub",
			token: func(t testing.TB) string { return keys.rsa.Sign(t, with(func(c map[string]any) { delete(c, "sub") })) },
		},
		{
			name:  "empty sub",
			token: func(t testing.TB) string { return keys.rsa.Sign(t, with(func(c map[string]any) { c["sub"] = "" })) },
		},
		{
			name:  "org_id not a string",
			token: func(t testing.TB) string { return keys.rsa.Sign(t, with(func(c map[string]any) { c["org_id"] = 42 })) },
		},
		{
			name:       "scope array holding a number",
			scopeClaim: "permissions",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["permissions"] = []any{"a", 1} }))
			},
		},
		{
			name: "scope of the wrong type",
			token: func(t testing.TB) string {
				return keys.rsa.Sign(t, with(func(c map[string]any) { c["scope"] = true }))
			},
		},
		{
			name:  "missing kid",
			token: func(t testing.TB) string { return keys.rsa.SignAs(t, jwa.RS256, nil, claims("user-1")) },
		},
		{
			name: "header alg differs from the jwk alg",
			token: func(t testing.TB) string {
				return keys.rsa.SignAs(t, jwa.RS384, map[string]any{"kid": keys.rsa.ID}, claims("user-1"))
			},
		},
		{
			name: "kid of another key",
			token: func(t testing.TB) string {
				return keys.rsaNoAlg.SignAs(t, jwa.RS256, map[string]any{"kid": keys.rsa.ID}, claims("user-1"))
			},
		},
		{
			name: "alg of another key type",
			token: func(t testing.TB) string {
				return keys.ec.SignAs(t, jwa.ES256, map[string]any{"kid": keys.rsaNoAlg.ID}, claims("user-1"))
			},
		},
		{
			name: "unknown crit header",
			token: func(t testing.TB) string {
				return keys.rsa.SignAs(t, jwa.RS256, map[string]any{"kid": keys.rsa.ID, "crit": []string{"exp"}, "exp": 1}, claims("user-1"))
			},
		},
		{
			name: "unknown kid",
			token: func(t testing.TB) string {
				return keys.rsa.SignAs(t, jwa.RS256, map[string]any{"kid": strings.Repeat("k", 300)}, claims("user-1"))
			},
		},
		{
			name: "tampered payload",
			token: func(t testing.TB) string {
				good := strings.Split(keys.rsa.Sign(t, claims("user-1")), ".")
				evil := strings.Split(keys.rsa.Sign(t, claims("admin")), ".")
				return good[0] + "." + evil[1] + "." + good[2]
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, idp.URL, newClock(), func(c *auth.VerifierConfig) { c.ScopeClaim = tt.scopeClaim })
			token := tt.token(t)
			// The second call is answered from the cache when the first succeeded.
			for range 2 {
				got, err := v.Verify(t.Context(), token)
				if tt.want == nil {
					requireInvalid(t, err, token)
					require.Nil(t, got)
					continue
				}
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
			}
		})
	}
}

func TestVerifyMalformed(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	idp := fake.NewIdP(t, fake.WithKeys(keys.all()...))
	valid := keys.rsa.Sign(t, claims("user-1"))
	parts := strings.Split(valid, ".")

	tests := []struct {
		name  string
		token string
	}{
		{name: "empty", token: ""},
		{name: "one segment", token: "abc"},
		{name: "two segments", token: parts[0] + "." + parts[1]},
		{name: "four segments", token: valid + ".abc"},
		{name: "jwe shape", token: strings.Join([]string{parts[0], "a", "b", "c", "d"}, ".")},
		{name: "empty payload", token: parts[0] + ".." + parts[2]},
		{name: "empty signature", token: parts[0] + "." + parts[1] + "."},
		{name: "padding", token: valid + "=="},
		{name: "whitespace", token: " " + valid},
		{name: "standard base64", token: "a+b/." + parts[1] + "." + parts[2]},
		{name: "json serialization", token: `{"payload":"` + parts[1] + `","signatures":[{"protected":"` + parts[0] + `","signature":"` + parts[2] + `"}]}`},
		{name: "header not base64 json", token: "bm90anNvbg." + parts[1] + "." + parts[2]},
		{name: "garbage", token: "aaaa.bbbb.cccc"},
		{name: "signed payload not json", token: keys.rsa.SignPayload(t, keys.rsa.Alg, map[string]any{"kid": keys.rsa.ID}, []byte("not json"))},
		{name: "signed payload a json array", token: keys.rsa.SignPayload(t, keys.rsa.Alg, map[string]any{"kid": keys.rsa.ID}, []byte(`["sub"]`))},
		{name: "oversized", token: parts[0] + "." + strings.Repeat("A", 20<<10) + "." + parts[2]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, idp.URL, newClock(), nil)
			got, err := v.Verify(t.Context(), tt.token)
			requireInvalid(t, err, tt.token)
			require.Nil(t, got)
		})
	}
}

func TestVerifyRefusesAlgorithmConfusion(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	// The served set also holds a symmetric key; it must never be used.
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	oct, err := jwk.FromRaw(secret)
	require.NoError(t, err)
	require.NoError(t, oct.Set(jwk.KeyIDKey, "oct-1"))
	require.NoError(t, oct.Set(jwk.AlgorithmKey, jwa.HS256))
	idp := fake.NewIdP(t, fake.WithKeys(append(keys.all(), fake.Key{ID: "oct-1", Public: oct})...))

	der, err := x509.MarshalPKIXPublicKey(&fake.RSAPrivateKey(t, 0).PublicKey)
	require.NoError(t, err)
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	jwkBytes, err := json.Marshal(keys.rsa.Public)
	require.NoError(t, err)
	mac := func(h func() hash.Hash, key []byte) func(string) []byte {
		return func(input string) []byte {
			m := hmac.New(h, key)
			m.Write([]byte(input))
			return m.Sum(nil)
		}
	}
	junk := func(string) []byte { return []byte("not a signature") }
	empty := func(string) []byte { return nil }
	header := func(alg string) map[string]any { return map[string]any{"alg": alg, "kid": keys.rsa.ID, "typ": "JWT"} }
	// Refused before any key was looked at: no case makes its verifier fetch the JWKS.
	t.Cleanup(func() { assert.Zero(t, idp.Fetches(), "jwks fetches") })

	tests := []struct {
		name   string
		header map[string]any
		sig    func(string) []byte
	}{
		{name: "alg none, empty signature", header: header("none"), sig: empty},
		{name: "alg none, junk signature", header: header("none"), sig: junk},
		{name: "alg None", header: header("None"), sig: junk},
		{name: "alg none without kid", header: map[string]any{"alg": "none"}, sig: junk},
		{name: "hs256 keyed with the rsa public key pem", header: header("HS256"), sig: mac(sha256.New, pemBytes)},
		{name: "hs256 keyed with the rsa public key der", header: header("HS256"), sig: mac(sha256.New, der)},
		{name: "hs256 keyed with the rsa public jwk", header: header("HS256"), sig: mac(sha256.New, jwkBytes)},
		{name: "hs512 keyed with the rsa public key pem", header: header("HS512"), sig: mac(sha512.New, pemBytes)},
		{name: "hs256 with the published symmetric key", header: map[string]any{"alg": "HS256", "kid": "oct-1"}, sig: mac(sha256.New, secret)},
		{name: "unknown alg", header: header("RS1"), sig: junk},
		{name: "missing alg", header: map[string]any{"kid": keys.rsa.ID}, sig: junk},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, idp.URL, newClock(), nil)
			token := fake.Compact(t, tt.header, claims("user-1"), tt.sig)
			got, err := v.Verify(t.Context(), token)
			requireInvalid(t, err, token)
			require.Nil(t, got)
		})
	}
}

func TestVerifyUnknownKid(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	later := fake.RSAKey(t, 2, "rsa-later")
	idp := fake.NewIdP(t, fake.WithKeys(keys.rsa))
	clock := newClock()
	const minRefresh = time.Hour
	v := newVerifier(t, idp.URL, clock, func(c *auth.VerifierConfig) {
		c.MinRefresh = minRefresh
		c.Leeway = 24 * time.Hour // the clock moves by hours here; keep the tokens valid
	})
	known := keys.rsa.Sign(t, claims("user-1"))
	fresh := later.Sign(t, claims("user-2"))
	stranger := keys.ec.Sign(t, claims("user-3")) // its key is never published

	// Steps run in order; each states the JWKS fetches expected so far.
	steps := []struct {
		name      string
		advance   time.Duration
		publish   []fake.Key // replaces the served set when non-nil
		token     string
		wantOK    bool
		wantFetch int64
	}{
		{name: "known kid loads the set once", token: known, wantOK: true, wantFetch: 1},
		{name: "new key published, refresh still rate-limited", publish: []fake.Key{keys.rsa, later}, token: fresh, wantFetch: 1},
		{name: "repeated unknown kid does not fetch", token: fresh, wantFetch: 1},
		{name: "stranger does not fetch either", token: stranger, wantFetch: 1},
		{name: "after min refresh the new key is found", advance: minRefresh, token: fresh, wantOK: true, wantFetch: 2},
		{name: "unknown kid right after a refresh does not fetch", token: stranger, wantFetch: 2},
		{name: "just before min refresh still no fetch", advance: minRefresh - time.Second, token: stranger, wantFetch: 2},
		{name: "one fetch per min refresh for an unknown kid", advance: time.Second, token: stranger, wantFetch: 3},
		{name: "hammering keeps it at one", token: stranger, wantFetch: 3},
		{name: "known kids keep working", token: known, wantOK: true, wantFetch: 3},
	}
	for _, st := range steps {
		ok := t.Run(st.name, func(t *testing.T) {
			clock.Advance(st.advance)
			if st.publish != nil {
				idp.Publish(t, st.publish...)
			}
			for range 3 {
				got, err := v.Verify(t.Context(), st.token)
				if st.wantOK {
					require.NoError(t, err)
					require.NotNil(t, got)
				} else {
					requireInvalid(t, err, st.token)
				}
			}
			require.Equal(t, st.wantFetch, idp.Fetches())
		})
		require.True(t, ok)
	}
}

func TestVerifyCacheRechecksTime(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	idp := fake.NewIdP(t, fake.WithKeys(keys.rsa))
	const leeway = time.Minute
	exp := t0.Add(time.Hour)

	tests := []struct {
		name    string
		advance time.Duration // from t0, before the second Verify
		wantOK  bool
	}{
		{name: "well before exp", advance: 30 * time.Minute, wantOK: true},
		{name: "at exp, within leeway", advance: time.Hour, wantOK: true},
		{name: "last instant of the leeway", advance: time.Hour + leeway - time.Nanosecond, wantOK: true},
		{name: "exp plus leeway", advance: time.Hour + leeway},
		{name: "long after exp", advance: 48 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			v := newVerifier(t, idp.URL, clock, func(c *auth.VerifierConfig) { c.Leeway = leeway })
			token := keys.rsa.Sign(t, claims("user-1"))
			first, err := v.Verify(t.Context(), token)
			require.NoError(t, err)
			require.Equal(t, exp, first.ExpiresAt)
			require.Equal(t, 1, auth.CacheLen(v))

			clock.Advance(tt.advance)
			got, err := v.Verify(t.Context(), token)
			if !tt.wantOK {
				requireInvalid(t, err, token)
				require.ErrorContains(t, err, "expired")
				require.Zero(t, auth.CacheLen(v), "an expired entry is dropped")
				// Refused for good: the full verification agrees with the cache.
				_, err = v.Verify(t.Context(), token)
				requireInvalid(t, err, token)
				return
			}
			require.NoError(t, err)
			require.Same(t, first, got, "answered from the cache")
		})
	}
}

func TestVerifyCacheKeepsTokensApart(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	idp := fake.NewIdP(t, fake.WithKeys(keys.all()...))
	signers := []fake.Key{keys.rsa, keys.ec, keys.ed}
	const n = 48
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = signers[i%len(signers)].Sign(t, claims(fmt.Sprintf("user-%d", i)))
	}

	tests := []struct {
		name      string
		cacheSize int
		wantMax   int
	}{
		{name: "disabled", cacheSize: -1, wantMax: 0},
		{name: "one entry", cacheSize: 1, wantMax: 1},
		{name: "smaller than the working set", cacheSize: 7, wantMax: 7},
		{name: "sharded, larger than the working set", cacheSize: 300, wantMax: n},
		{name: "default size", wantMax: n},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, idp.URL, newClock(), func(c *auth.VerifierConfig) { c.CacheSize = tt.cacheSize })
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Go(func() {
					for round := range 3 {
						for j := range n {
							i := (j*7 + w*5 + round) % n
							p, err := v.Verify(t.Context(), tokens[i])
							if assert.NoError(t, err) {
								assert.Equal(t, fmt.Sprintf("user-%d", i), p.UserID)
								assert.Equal(t, "jti-"+p.UserID, p.TokenID)
							}
						}
					}
				})
			}
			wg.Wait()
			assert.LessOrEqual(t, auth.CacheLen(v), tt.wantMax)

			// Forget drops exactly one token.
			_, err := v.Verify(t.Context(), tokens[0])
			require.NoError(t, err)
			before := auth.CacheLen(v)
			v.Forget(tokens[0])
			if tt.cacheSize >= 0 {
				require.Equal(t, max(before-1, 0), auth.CacheLen(v))
			}
		})
	}
}

func TestVerifyRevokedKeyDropsCachedTokens(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	idp := fake.NewIdP(t, fake.WithKeys(keys.rsa, keys.ec))
	clock := newClock()
	v := newVerifier(t, idp.URL, clock, nil) // MinRefresh is an hour
	revoked := keys.rsa.Sign(t, claims("user-1"))
	kept := keys.ec.Sign(t, claims("user-2"))
	for _, tok := range []string{revoked, kept} {
		_, err := v.Verify(t.Context(), tok)
		require.NoError(t, err)
	}

	// The IdP withdraws the RSA key; an unknown kid triggers the refresh that notices.
	idp.Publish(t, keys.ec)
	clock.Advance(time.Hour)
	_, err := v.Verify(t.Context(), keys.ed.Sign(t, claims("user-3")))
	requireInvalid(t, err, "")
	require.EqualValues(t, 2, idp.Fetches())

	_, err = v.Verify(t.Context(), revoked)
	requireInvalid(t, err, revoked)
	p, err := v.Verify(t.Context(), kept)
	require.NoError(t, err)
	require.Equal(t, "user-2", p.UserID)
}

func TestVerifyIgnoresUnusableKeys(t *testing.T) {
	t.Parallel()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	published := func(kid string, alg jwa.SignatureAlgorithm, priv any, edit func(k jwk.Key)) fake.Key {
		k := fake.NewKey(t, kid, alg, "", priv)
		edit(k.Public)
		return k
	}
	set := func(name string, value any) func(k jwk.Key) {
		return func(k jwk.Key) { require.NoError(t, k.Set(name, value)) }
	}

	tests := []struct {
		name   string
		key    fake.Key
		wantOK bool
	}{
		{name: "use sig", key: published("use-sig", jwa.RS256, fake.RSAPrivateKey(t, 0), set(jwk.KeyUsageKey, "sig")), wantOK: true},
		{name: "key_ops verify", key: published("ops-verify", jwa.RS256, fake.RSAPrivateKey(t, 0), set(jwk.KeyOpsKey, []string{"verify"})), wantOK: true},
		{name: "p-384 without alg", key: published("p384", jwa.ES384, p384, func(jwk.Key) {}), wantOK: true},
		{name: "use enc", key: published("use-enc", jwa.RS256, fake.RSAPrivateKey(t, 0), set(jwk.KeyUsageKey, "enc"))},
		{name: "key_ops encrypt", key: published("ops-enc", jwa.RS256, fake.RSAPrivateKey(t, 0), set(jwk.KeyOpsKey, []string{"encrypt"}))},
		{name: "encryption alg", key: published("oaep", jwa.RS256, fake.RSAPrivateKey(t, 0), set(jwk.AlgorithmKey, "RSA-OAEP"))},
		{name: "rsa-1024", key: published("small", jwa.RS256, small, func(jwk.Key) {})},
		{name: "alg for another curve", key: published("curve", jwa.ES384, p384, set(jwk.AlgorithmKey, "ES256"))},
	}
	keys := make([]fake.Key, 0, len(tests))
	for _, tt := range tests {
		keys = append(keys, tt.key)
	}
	idp := fake.NewIdP(t, fake.WithKeys(keys...))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, idp.URL, newClock(), nil)
			token := tt.key.Sign(t, claims("user-1"))
			p, err := v.Verify(t.Context(), token)
			if tt.wantOK {
				require.NoError(t, err)
				require.Equal(t, "user-1", p.UserID)
				return
			}
			requireInvalid(t, err, token)
		})
	}
}

func TestVerifyCacheEvictsExpiredFirst(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	idp := fake.NewIdP(t, fake.WithKeys(keys.rsa))
	clock := newClock()
	v := newVerifier(t, idp.URL, clock, func(c *auth.VerifierConfig) { c.CacheSize = 2; c.Leeway = 0 })
	lifetime := func(sub string, d time.Duration) string {
		c := claims(sub)
		c["exp"] = t0.Add(d).Unix()
		return keys.rsa.Sign(t, c)
	}
	short, long, next := lifetime("short", time.Minute), lifetime("long", time.Hour), lifetime("next", time.Hour)

	_, err := v.Verify(t.Context(), short)
	require.NoError(t, err)
	kept, err := v.Verify(t.Context(), long)
	require.NoError(t, err)
	require.Equal(t, 2, auth.CacheLen(v))

	clock.Advance(2 * time.Minute)
	_, err = v.Verify(t.Context(), next) // the cache is full: the expired entry goes
	require.NoError(t, err)
	require.Equal(t, 2, auth.CacheLen(v))
	got, err := v.Verify(t.Context(), long)
	require.NoError(t, err)
	require.Same(t, kept, got)
}

func TestReady(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)

	tests := []struct {
		name    string
		failure fake.Failure // how the IdP fails while down
		body    string       // served body while down, when it does not fail
	}{
		{name: "connection dropped", failure: fake.Abort},
		{name: "server error", failure: fake.Unavailable},
		{name: "not a jwks", body: `<html>hello</html>`},
		{name: "no usable key", body: `{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"}]}`},
		{name: "oversized", body: `{"keys":[],"pad":"` + strings.Repeat("x", 1<<20) + `"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			idp := fake.NewIdP(t, fake.WithKeys(keys.rsa))
			idp.SetFailure(tt.failure)
			if tt.body != "" {
				idp.Serve([]byte(tt.body))
			}
			clock := newClock()
			v := newVerifier(t, idp.URL, clock, nil)
			token := keys.rsa.Sign(t, claims("user-1"))

			require.Error(t, v.Ready(t.Context()))
			_, err := v.Verify(t.Context(), token)
			requireInvalid(t, err, token)

			idp.SetFailure(fake.Healthy)
			idp.Publish(t, keys.rsa)
			// Fetches are limited also while no usable key is loaded: the IdP is asked
			// again only once the first backoff interval, a second, has passed.
			require.Error(t, v.Ready(t.Context()))
			require.Equal(t, int64(1), idp.Fetches())
			clock.Advance(time.Second)
			require.NoError(t, v.Ready(t.Context()))
			p, err := v.Verify(t.Context(), token)
			require.NoError(t, err)
			require.Equal(t, "user-1", p.UserID)
		})
	}
}

func TestReadyUnreachable(t *testing.T) {
	t.Parallel()
	keys := newKeyring(t)
	idp := fake.NewIdP(t, fake.WithKeys(keys.rsa))
	idp.Close() // nothing listens there any more

	v := newVerifier(t, idp.URL, newClock(), nil) // NewVerifier does not need the URL
	require.Error(t, v.Ready(t.Context()))
	token := keys.rsa.Sign(t, claims("user-1"))
	_, err := v.Verify(t.Context(), token)
	requireInvalid(t, err, token)
}

func TestNewVerifierConfig(t *testing.T) {
	t.Parallel()
	valid := auth.VerifierConfig{JWKSURL: "https://idp.example.test/jwks.json", Issuer: testIssuer, Audience: testAudience}

	tests := []struct {
		name    string
		edit    func(c *auth.VerifierConfig)
		wantErr string
	}{
		{name: "valid", edit: func(*auth.VerifierConfig) {}},
		{name: "plain http for the built-in issuer", edit: func(c *auth.VerifierConfig) { c.JWKSURL = "http://127.0.0.1:8080/.well-known/jwks.json" }},
		{name: "missing url", edit: func(c *auth.VerifierConfig) { c.JWKSURL = "" }, wantErr: "jwks url is required"},
		{name: "relative url", edit: func(c *auth.VerifierConfig) { c.JWKSURL = "/jwks.json" }, wantErr: "absolute http(s) URL"},
		{name: "other scheme", edit: func(c *auth.VerifierConfig) { c.JWKSURL = "file:///etc/jwks.json" }, wantErr: "absolute http(s) URL"},
		{name: "missing issuer", edit: func(c *auth.VerifierConfig) { c.Issuer = "" }, wantErr: "issuer is required"},
		{name: "missing audience", edit: func(c *auth.VerifierConfig) { c.Audience = "" }, wantErr: "audience is required"},
		{name: "negative leeway", edit: func(c *auth.VerifierConfig) { c.Leeway = -time.Second }, wantErr: "leeway"},
		{name: "negative min refresh", edit: func(c *auth.VerifierConfig) { c.MinRefresh = -time.Second }, wantErr: "min refresh"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid
			tt.edit(&cfg)
			v, err := auth.NewVerifier(t.Context(), cfg)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Nil(t, v)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, v)
		})
	}
}

func TestPrincipalHasScope(t *testing.T) {
	t.Parallel()
	p := &auth.Principal{Scopes: []string{"read:custom_drug", "update:user"}}

	tests := []struct {
		name  string
		names []string
		want  bool
	}{
		{name: "one held", names: []string{"update:user"}, want: true},
		{name: "any of several", names: []string{"delete:user", "update:user"}, want: true},
		{name: "none held", names: []string{"READ_USER"}},
		{name: "case matters", names: []string{"UPDATE:USER"}},
		{name: "no names", names: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, p.HasScope(tt.names...))
		})
	}
}

// benchVerifier serves a fresh RS256 key and returns a Verifier with its keys loaded and a
// valid token.
func benchVerifier(b *testing.B, cacheSize int) (*auth.Verifier, string) {
	b.Helper()
	key := fake.RSAKey(b, 3, "bench")
	idp := fake.NewIdP(b, fake.WithKeys(key))
	clock := newClock()
	v := newVerifier(b, idp.URL, clock, func(c *auth.VerifierConfig) { c.CacheSize = cacheSize })
	require.NoError(b, v.Ready(b.Context()))
	return v, key.Sign(b, claims("user-1"))
}

func BenchmarkVerifyUncached(b *testing.B) {
	v, token := benchVerifier(b, -1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(b.Context(), token); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyCached(b *testing.B) {
	v, token := benchVerifier(b, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(b.Context(), token); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyCachedParallel(b *testing.B) {
	v, token := benchVerifier(b, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := v.Verify(b.Context(), token); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
