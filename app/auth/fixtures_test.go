package auth_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
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

// testKey is a signing key and the public JWK a JWKS server publishes for it.
type testKey struct {
	kid  string
	alg  jwa.SignatureAlgorithm // alg tokens are signed with by default
	priv any                    // raw private key
	pub  jwk.Key                // published form
}

// RSA key generation is slow; tests share a few keys.
var rsaKeys [4]struct {
	once sync.Once
	key  *rsa.PrivateKey
	err  error
}

func rsaKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	k := &rsaKeys[i]
	k.once.Do(func() { k.key, k.err = rsa.GenerateKey(rand.Reader, 2048) })
	require.NoError(t, k.err)
	return k.key
}

// newTestKey publishes priv under kid; publishAlg "" publishes the JWK without alg.
func newTestKey(t testing.TB, kid string, alg, publishAlg jwa.SignatureAlgorithm, priv any) testKey {
	t.Helper()
	var pubRaw any
	switch p := priv.(type) {
	case *rsa.PrivateKey:
		pubRaw = &p.PublicKey
	case *ecdsa.PrivateKey:
		pubRaw = &p.PublicKey
	case ed25519.PrivateKey:
		pubRaw = p.Public()
	default:
		t.Fatalf("unsupported key %T", priv)
	}
	pub, err := jwk.FromRaw(pubRaw)
	require.NoError(t, err)
	require.NoError(t, pub.Set(jwk.KeyIDKey, kid))
	if publishAlg != "" {
		require.NoError(t, pub.Set(jwk.AlgorithmKey, publishAlg))
	}
	return testKey{kid: kid, alg: alg, priv: priv, pub: pub}
}

func rsaTestKey(t testing.TB, i int, kid string) testKey {
	t.Helper()
	return newTestKey(t, kid, jwa.RS256, jwa.RS256, rsaKey(t, i))
}

func ecTestKey(t testing.TB, kid string) testKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return newTestKey(t, kid, jwa.ES256, jwa.ES256, priv)
}

func edTestKey(t testing.TB, kid string) testKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return newTestKey(t, kid, jwa.EdDSA, jwa.EdDSA, priv)
}

// jwksServer serves a JWKS that tests can change, break, and count requests to.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int64

	mu   sync.Mutex
	body []byte // served with 200 when status is 0
	mode string // "", "abort" (drop the connection) or "503"
}

func newJWKSServer(t testing.TB, keys ...testKey) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.setKeys(t, keys...)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(w http.ResponseWriter, _ *http.Request) {
	s.hits.Add(1)
	s.mu.Lock()
	body, mode := s.body, s.mode
	s.mu.Unlock()
	switch mode {
	case "abort":
		panic(http.ErrAbortHandler)
	case "503":
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (s *jwksServer) setKeys(t testing.TB, keys ...testKey) {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		require.NoError(t, set.AddKey(k.pub))
	}
	body, err := json.Marshal(set)
	require.NoError(t, err)
	s.setBody(body)
}

func (s *jwksServer) setBody(body []byte) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

func (s *jwksServer) setMode(mode string) {
	s.mu.Lock()
	s.mode = mode
	s.mu.Unlock()
}

// newVerifier builds a Verifier for srvURL driven by clock, with MinRefresh an hour so that
// jwk.Cache never refreshes in the background during a test. mod adjusts the config.
func newVerifier(t testing.TB, srvURL string, clock *fake.Clock, mod func(*auth.VerifierConfig)) *auth.Verifier {
	t.Helper()
	cfg := auth.VerifierConfig{
		JWKSURL:    srvURL,
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

// sign signs c with k under k's default alg and kid.
func sign(t testing.TB, k testKey, c map[string]any) string {
	t.Helper()
	return signAs(t, k, k.alg, map[string]any{"kid": k.kid}, c)
}

// signAs signs c with k using alg and the given protected header fields (plus typ JWT).
func signAs(t testing.TB, k testKey, alg jwa.SignatureAlgorithm, header, c map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(c)
	require.NoError(t, err)
	return signPayload(t, k, alg, header, payload)
}

// signPayload signs an arbitrary payload.
func signPayload(t testing.TB, k testKey, alg jwa.SignatureAlgorithm, header map[string]any, payload []byte) string {
	t.Helper()
	h := jws.NewHeaders()
	require.NoError(t, h.Set("typ", "JWT"))
	for name, value := range header {
		require.NoError(t, h.Set(name, value))
	}
	out, err := jws.Sign(payload, jws.WithKey(alg, k.priv, jws.WithProtectedHeaders(h)))
	require.NoError(t, err)
	return string(out)
}

// handBuilt assembles a compact JWS from a header, claims and signature function over the
// signing input, bypassing jwx's signer.
func handBuilt(t testing.TB, header, c map[string]any, sig func(signingInput string) []byte) string {
	t.Helper()
	enc := base64.RawURLEncoding
	h, err := json.Marshal(header)
	require.NoError(t, err)
	p, err := json.Marshal(c)
	require.NoError(t, err)
	input := enc.EncodeToString(h) + "." + enc.EncodeToString(p)
	return input + "." + enc.EncodeToString(sig(input))
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
