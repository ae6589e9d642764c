package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/testsuite/fake"
)

// Every GenerateKey call costs an RSA key generation; tests share one.
var generated = sync.OnceValues(auth.GenerateKey)

func generatedKey(t testing.TB) []byte {
	t.Helper()
	key, err := generated()
	require.NoError(t, err)
	return key
}

func TestGenerateKey(t *testing.T) {
	t.Parallel()
	raw := generatedKey(t)

	var fields map[string]any
	require.NoError(t, json.Unmarshal(raw, &fields))
	assert.Equal(t, "RSA", fields["kty"])
	assert.Equal(t, "RS256", fields["alg"])
	assert.Contains(t, fields, "d", "a private key")

	// kid is the RFC 7638 thumbprint: SHA-256 over the required members in lexical order.
	canonical := `{"e":"` + fields["e"].(string) + `","kty":"RSA","n":"` + fields["n"].(string) + `"}`
	sum := sha256.Sum256([]byte(canonical))
	assert.Equal(t, base64.RawURLEncoding.EncodeToString(sum[:]), fields["kid"])

	key, err := jwk.ParseKey(raw)
	require.NoError(t, err)
	var priv rsa.PrivateKey
	require.NoError(t, key.Raw(&priv))
	assert.Equal(t, 2048, priv.N.BitLen())
}

// issuerServer serves iss.JWKS() the way the server's /.well-known/jwks.json does.
func issuerServer(t testing.TB, iss *auth.Issuer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(iss.JWKS())
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestIssuerMintVerifies(t *testing.T) {
	t.Parallel()
	clock := newClock()
	iss, err := auth.NewIssuer(generatedKey(t), testIssuer, testAudience, clock.Now)
	require.NoError(t, err)
	srv := issuerServer(t, iss)

	tests := []struct {
		name string
		req  auth.MintRequest
	}{
		{name: "org user with scopes", req: auth.MintRequest{UserID: "user-1", OrgID: "org-1", Scopes: []string{"update:patient", "READ_USER"}, TTL: time.Hour}},
		{name: "no org", req: auth.MintRequest{UserID: "user-2", Scopes: []string{"read:custom_drug"}, TTL: 15 * time.Minute}},
		{name: "no scopes", req: auth.MintRequest{UserID: "user-3", OrgID: "org-3", TTL: time.Minute}},
		{name: "sub-second ttl is truncated", req: auth.MintRequest{UserID: "user-4", TTL: 90*time.Second + 500*time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			token, expiresAt, err := iss.Mint(tt.req)
			require.NoError(t, err)
			assert.Equal(t, t0.Add(tt.req.TTL).Truncate(time.Second), expiresAt)

			var header map[string]any
			seg, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(seg, &header))
			assert.Equal(t, map[string]any{"alg": "RS256", "kid": iss.KeyID(), "typ": "JWT"}, header)

			v := newVerifier(t, srv.URL, clock, nil)
			p, err := v.Verify(t.Context(), token)
			require.NoError(t, err)
			assert.Equal(t, tt.req.UserID, p.UserID)
			assert.Equal(t, tt.req.OrgID, p.OrgID)
			assert.Equal(t, tt.req.Scopes, p.Scopes)
			assert.Equal(t, expiresAt, p.ExpiresAt)
			_, err = uuid.Parse(p.TokenID)
			assert.NoError(t, err, "jti is a uuid")
		})
	}
}

func TestIssuerMintRejects(t *testing.T) {
	t.Parallel()
	iss, err := auth.NewIssuer(generatedKey(t), testIssuer, testAudience, nil)
	require.NoError(t, err)

	tests := []struct {
		name string
		req  auth.MintRequest
	}{
		{name: "no user", req: auth.MintRequest{TTL: time.Hour}},
		{name: "no ttl", req: auth.MintRequest{UserID: "u"}},
		{name: "negative ttl", req: auth.MintRequest{UserID: "u", TTL: -time.Hour}},
		{name: "empty scope", req: auth.MintRequest{UserID: "u", TTL: time.Hour, Scopes: []string{""}}},
		{name: "scope with a space", req: auth.MintRequest{UserID: "u", TTL: time.Hour, Scopes: []string{"read:patient update:user"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			token, _, err := iss.Mint(tt.req)
			require.Error(t, err)
			require.Empty(t, token)
		})
	}
}

func TestIssuerJWKS(t *testing.T) {
	t.Parallel()
	iss, err := auth.NewIssuer(generatedKey(t), testIssuer, testAudience, nil)
	require.NoError(t, err)

	set, err := jwk.Parse(iss.JWKS())
	require.NoError(t, err)
	require.Equal(t, 1, set.Len())
	key, ok := set.LookupKeyID(iss.KeyID())
	require.True(t, ok)
	assert.Equal(t, "RS256", key.Algorithm().String())
	assert.Equal(t, "sig", key.KeyUsage())
	var fields map[string]any
	require.NoError(t, json.Unmarshal(iss.JWKS(), &fields))
	for _, private := range []string{"d", "p", "q", "dp", "dq", "qi"} {
		assert.NotContains(t, fields["keys"].([]any)[0], private)
	}

	// Callers cannot corrupt the served set.
	buf := iss.JWKS()
	buf[0] = 'x'
	assert.Equal(t, byte('{'), iss.JWKS()[0])
}

func TestNewIssuer(t *testing.T) {
	t.Parallel()
	toJWK := func(t testing.TB, raw any, edit func(k jwk.Key)) []byte {
		t.Helper()
		k, err := jwk.FromRaw(raw)
		require.NoError(t, err)
		if edit != nil {
			edit(k)
		}
		buf, err := json.Marshal(k)
		require.NoError(t, err)
		return buf
	}
	ecPriv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)

	tests := []struct {
		name     string
		key      func(t testing.TB) []byte
		issuer   string
		audience string
		wantKid  string // "" with wantErr
		wantErr  bool
	}{
		{name: "generated key", key: generatedKey, issuer: testIssuer, audience: testAudience},
		{
			name:   "key without kid gets its thumbprint",
			key:    func(t testing.TB) []byte { return toJWK(t, fake.RSAPrivateKey(t, 2), nil) },
			issuer: testIssuer, audience: testAudience,
		},
		{
			name: "key with its own kid keeps it",
			key: func(t testing.TB) []byte {
				return toJWK(t, fake.RSAPrivateKey(t, 2), func(k jwk.Key) { _ = k.Set(jwk.KeyIDKey, "mine") })
			},
			issuer: testIssuer, audience: testAudience, wantKid: "mine",
		},
		{name: "public key only", key: func(t testing.TB) []byte { return toJWK(t, &fake.RSAPrivateKey(t, 2).PublicKey, nil) }, issuer: testIssuer, audience: testAudience, wantErr: true},
		{name: "ec key", key: func(t testing.TB) []byte { return toJWK(t, ecPriv, nil) }, issuer: testIssuer, audience: testAudience, wantErr: true},
		{name: "rsa-1024", key: func(t testing.TB) []byte { return toJWK(t, small, nil) }, issuer: testIssuer, audience: testAudience, wantErr: true},
		{
			name: "alg other than rs256",
			key: func(t testing.TB) []byte {
				return toJWK(t, fake.RSAPrivateKey(t, 2), func(k jwk.Key) { _ = k.Set(jwk.AlgorithmKey, "PS256") })
			},
			issuer: testIssuer, audience: testAudience, wantErr: true,
		},
		{name: "not json", key: func(testing.TB) []byte { return []byte("-----BEGIN") }, issuer: testIssuer, audience: testAudience, wantErr: true},
		{name: "no issuer", key: generatedKey, audience: testAudience, wantErr: true},
		{name: "no audience", key: generatedKey, issuer: testIssuer, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			iss, err := auth.NewIssuer(tt.key(t), tt.issuer, tt.audience, nil)
			if tt.wantErr {
				require.Error(t, err)
				require.Nil(t, iss)
				return
			}
			require.NoError(t, err)
			if tt.wantKid != "" {
				assert.Equal(t, tt.wantKid, iss.KeyID())
			} else {
				assert.Len(t, iss.KeyID(), 43, "base64url SHA-256 thumbprint")
			}
			set, err := jwk.Parse(iss.JWKS())
			require.NoError(t, err)
			_, ok := set.LookupKeyID(iss.KeyID())
			assert.True(t, ok)
		})
	}
}
