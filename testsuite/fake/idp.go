package fake

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
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

	"github.com/rxgate/rxgate/config"
)

// Key ids of the keys an IdP mints with.
const (
	RSAKeyID = "fake-idp-rsa"
	ECKeyID  = "fake-idp-ec"
)

// Key is a signing key and the JWK an IdP publishes for it.
type Key struct {
	// ID is the kid tokens are signed under by Sign.
	ID string
	// Alg is the algorithm Sign signs with.
	Alg jwa.SignatureAlgorithm
	// Private is the raw private key (an *rsa.PrivateKey, an
	// *ecdsa.PrivateKey or an ed25519.PrivateKey); nil for a key that is
	// only published.
	Private any
	// Public is the published form, which a test may edit before it is
	// published.
	Public jwk.Key
}

// RSA key generation is slow, under -race above all: a test binary makes
// at most a few RSA keys and its tests share them.
var rsaKeys [4]struct {
	once sync.Once
	key  *rsa.PrivateKey
	err  error
}

// idpEC is the P-256 key every IdP mints ES256 tokens with.
var idpEC = sync.OnceValues(func() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
})

// RSAPrivateKey returns the test binary's RSA key number i (0 to 3), a
// 2048-bit key made on first use. An IdP mints RS256 tokens with key 0.
func RSAPrivateKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	k := &rsaKeys[i]
	k.once.Do(func() { k.key, k.err = rsa.GenerateKey(rand.Reader, 2048) })
	require.NoError(t, k.err, "fake: generating an RSA key")
	return k.key
}

// NewKey returns priv as a Key signing with alg under kid, published with
// the kid and publishAlg ("" publishes it without alg).
func NewKey(t testing.TB, kid string, alg, publishAlg jwa.SignatureAlgorithm, priv any) Key {
	t.Helper()
	var pub any
	switch p := priv.(type) {
	case *rsa.PrivateKey:
		pub = &p.PublicKey
	case *ecdsa.PrivateKey:
		pub = &p.PublicKey
	case ed25519.PrivateKey:
		pub = p.Public()
	default:
		t.Fatalf("fake: unsupported key %T", priv)
	}
	k, err := jwk.FromRaw(pub)
	require.NoError(t, err)
	require.NoError(t, k.Set(jwk.KeyIDKey, kid))
	if publishAlg != "" {
		require.NoError(t, k.Set(jwk.AlgorithmKey, publishAlg))
	}
	return Key{ID: kid, Alg: alg, Private: priv, Public: k}
}

// RSAKey is RSAPrivateKey i as an RS256 Key under kid.
func RSAKey(t testing.TB, i int, kid string) Key {
	t.Helper()
	return NewKey(t, kid, jwa.RS256, jwa.RS256, RSAPrivateKey(t, i))
}

// ECKey is a new P-256 key as an ES256 Key under kid.
func ECKey(t testing.TB, kid string) Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return NewKey(t, kid, jwa.ES256, jwa.ES256, priv)
}

// EdKey is a new Ed25519 key as an EdDSA Key under kid.
func EdKey(t testing.TB, kid string) Key {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return NewKey(t, kid, jwa.EdDSA, jwa.EdDSA, priv)
}

// Sign signs claims with k under its Alg and ID.
func (k Key) Sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	return k.SignAs(t, k.Alg, map[string]any{"kid": k.ID}, claims)
}

// SignAs signs claims with k and alg. The protected header is alg, typ
// JWT and header's members, which may replace them.
func (k Key) SignAs(t testing.TB, alg jwa.SignatureAlgorithm, header, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	return k.SignPayload(t, alg, header, payload)
}

// SignPayload is SignAs with a payload as it is, JSON or not.
func (k Key) SignPayload(t testing.TB, alg jwa.SignatureAlgorithm, header map[string]any, payload []byte) string {
	t.Helper()
	token, err := k.sign(alg, header, payload)
	require.NoError(t, err)
	return token
}

func (k Key) sign(alg jwa.SignatureAlgorithm, header map[string]any, payload []byte) (string, error) {
	signer, err := jws.NewSigner(alg)
	if err != nil {
		return "", err
	}
	h := map[string]any{"alg": alg.String(), "typ": "JWT"}
	maps.Copy(h, header)
	var sigErr error
	token := compact(h, payload, func(input string) []byte {
		var sig []byte
		sig, sigErr = signer.Sign([]byte(input), k.Private)
		return sig
	})
	return token, sigErr
}

// Compact assembles a compact JWS from a header and claims as they are,
// signed by sig over the signing input: for tokens no signer would make.
func Compact(t testing.TB, header, claims map[string]any, sig func(signingInput string) []byte) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	require.NoError(t, err)
	return compact(header, payload, sig)
}

// compact serialises a JWS: base64url(header).base64url(payload).base64url(sig).
func compact(header map[string]any, payload []byte, sig func(signingInput string) []byte) string {
	input := segment(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	return input + "." + base64.RawURLEncoding.EncodeToString(sig(input))
}

func segment(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fake: marshal token segment: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Failure is how an IdP fails to serve its JWKS.
type Failure int

// Failures of an IdP.
const (
	Healthy     Failure = iota // the JWKS is served
	Abort                      // the connection is dropped
	Unavailable                // 503 Service Unavailable
)

// IdP is an external identity provider: an httptest server publishing a
// JWKS at URL, and a minter of tokens with any claims and headers,
// well-formed or hostile. By default it publishes the RSA key Mint signs
// RS256 tokens with (kid RSAKeyID), and WithES256 the P-256 key of ES256
// tokens too (ECKeyID); WithKeys publishes other keys instead. A test may
// change what it serves while it runs (Publish, Serve, SetFailure).
type IdP struct {
	// URL is the JWKS URL, for the server's auth.jwks_url or a verifier.
	URL string
	// Issuer, Audience and ScopeClaim shape Claims. They default to
	// config.Defaults()'s auth.issuer, auth.audience and auth.scope_claim.
	Issuer, Audience, ScopeClaim string
	// Now is the clock of Claims and the time-shifting helpers.
	Now func() time.Time

	rsa, ec Key
	srv     *httptest.Server
	fetches atomic.Int64

	mu       sync.Mutex
	body     []byte  // guarded by mu
	failure  Failure // guarded by mu
	redirect string  // guarded by mu; when set, the JWKS answers 302 to it
}

// IdPOption adjusts NewIdP.
type IdPOption func(*idpOptions)

type idpOptions struct {
	es256 bool
	keys  []Key
}

// WithES256 also publishes the ES256 (P-256) key, kid ECKeyID.
func WithES256() IdPOption { return func(o *idpOptions) { o.es256 = true } }

// WithKeys publishes keys instead of the IdP's own.
func WithKeys(keys ...Key) IdPOption {
	return func(o *idpOptions) { o.keys = append([]Key{}, keys...) }
}

// NewIdP starts an IdP; t.Cleanup stops it.
func NewIdP(t testing.TB, opts ...IdPOption) *IdP {
	t.Helper()
	var o idpOptions
	for _, opt := range opts {
		opt(&o)
	}
	ecPriv, err := idpEC()
	require.NoError(t, err, "fake: generating the IdP's EC key")
	defaults := config.Defaults()
	f := &IdP{
		Issuer: defaults.Auth.Issuer, Audience: defaults.Auth.Audience, ScopeClaim: defaults.Auth.ScopeClaim,
		Now: time.Now,
		rsa: NewKey(t, RSAKeyID, jwa.RS256, jwa.RS256, RSAPrivateKey(t, 0)),
		ec:  NewKey(t, ECKeyID, jwa.ES256, jwa.ES256, ecPriv),
	}
	keys := o.keys
	if keys == nil {
		keys = []Key{f.rsa}
		if o.es256 {
			keys = append(keys, f.ec)
		}
		for _, k := range keys {
			require.NoError(t, k.Public.Set(jwk.KeyUsageKey, jwk.ForSignature))
		}
	}
	f.Publish(t, keys...)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	f.URL = f.srv.URL + "/.well-known/jwks.json"
	return f
}

func (f *IdP) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/.well-known/jwks.json" {
		http.NotFound(w, r)
		return
	}
	f.fetches.Add(1)
	f.mu.Lock()
	body, failure, redirect := f.body, f.failure, f.redirect
	f.mu.Unlock()
	if redirect != "" {
		http.Redirect(w, r, redirect, http.StatusFound)
		return
	}
	switch failure {
	case Abort:
		panic(http.ErrAbortHandler)
	case Unavailable:
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// Publish replaces the served JWKS with one of keys' public forms.
func (f *IdP) Publish(t testing.TB, keys ...Key) {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		require.NoError(t, set.AddKey(k.Public))
	}
	body, err := json.Marshal(set)
	require.NoError(t, err)
	f.Serve(body)
}

// Serve replaces the served JWKS with body, whatever it is.
func (f *IdP) Serve(body []byte) {
	f.mu.Lock()
	f.body = body
	f.mu.Unlock()
}

// SetFailure makes the IdP fail to serve its JWKS as failure says, until
// it is set Healthy again.
func (f *IdP) SetFailure(failure Failure) {
	f.mu.Lock()
	f.failure = failure
	f.mu.Unlock()
}

// RedirectTo makes the IdP answer every JWKS request with 302 Found to
// target (another IdP's URL, say) until it is called with "". A redirect
// counts as a fetch.
func (f *IdP) RedirectTo(target string) {
	f.mu.Lock()
	f.redirect = target
	f.mu.Unlock()
}

// Close stops the IdP's server: nothing listens at URL any more.
func (f *IdP) Close() { f.srv.Close() }

// Fetches is how often the JWKS has been fetched.
func (f *IdP) Fetches() int64 { return f.fetches.Load() }

// PublicJWK returns the public key of alg ("RS256" or "ES256") as a JWK
// object with the given kid, e.g. to embed it in a token header.
func (f *IdP) PublicJWK(alg, kid string) map[string]any {
	var pub any = &f.rsa.Private.(*rsa.PrivateKey).PublicKey
	if alg == "ES256" {
		pub = &f.ec.Private.(*ecdsa.PrivateKey).PublicKey
	}
	k, err := jwk.FromRaw(pub)
	if err == nil {
		err = k.Set(jwk.KeyIDKey, kid)
	}
	var out map[string]any
	if err == nil {
		var b []byte
		if b, err = json.Marshal(k); err == nil {
			err = json.Unmarshal(b, &out)
		}
	}
	if err != nil {
		panic(fmt.Sprintf("fake: public key as JWK: %v", err))
	}
	return out
}

// Claims returns well-formed claims: iss, aud, sub, org_id (omitted when
// orgID is ""), the scope claim (omitted without scopes), iat and nbf now,
// exp in an hour, and a jti.
func (f *IdP) Claims(sub, orgID string, scopes ...string) map[string]any {
	now := f.Now().Unix()
	var jti [6]byte
	_, _ = rand.Read(jti[:])
	c := map[string]any{
		"iss": f.Issuer, "aud": f.Audience, "sub": sub,
		"iat": now, "nbf": now, "exp": now + 3600,
		"jti": "jti-" + hex.EncodeToString(jti[:]),
	}
	if orgID != "" {
		c["org_id"] = orgID
	}
	if len(scopes) > 0 {
		if f.ScopeClaim == "scope" {
			c["scope"] = strings.Join(scopes, " ")
		} else {
			c[f.ScopeClaim] = scopes
		}
	}
	return c
}

// MintOption adjusts Mint.
type MintOption func(*mintOptions)

type mintOptions struct {
	alg     string
	kid     *string
	headers map[string]any
}

// WithAlg signs with "RS256" (the default, RSA key) or "ES256" (EC key).
func WithAlg(alg string) MintOption { return func(o *mintOptions) { o.alg = alg } }

// WithKeyID sets the kid header; "" omits it.
func WithKeyID(kid string) MintOption { return func(o *mintOptions) { o.kid = &kid } }

// WithHeader sets a protected header member (after alg, kid and typ).
func WithHeader(name string, value any) MintOption {
	return func(o *mintOptions) {
		if o.headers == nil {
			o.headers = map[string]any{}
		}
		o.headers[name] = value
	}
}

// Mint signs claims exactly as given. By default the header is alg RS256,
// typ JWT and the kid of the signing key.
func (f *IdP) Mint(claims map[string]any, opts ...MintOption) string {
	o := mintOptions{alg: "RS256"}
	for _, opt := range opts {
		opt(&o)
	}
	var key Key
	switch o.alg {
	case "RS256":
		key = f.rsa
	case "ES256":
		key = f.ec
	default:
		panic(fmt.Sprintf("fake: Mint cannot sign %s; use the hostile token helpers", o.alg))
	}
	header := map[string]any{}
	kid := key.ID
	if o.kid != nil {
		kid = *o.kid
	}
	if kid != "" {
		header["kid"] = kid
	}
	maps.Copy(header, o.headers)
	payload, err := json.Marshal(claims)
	if err != nil {
		panic(fmt.Sprintf("fake: marshal claims: %v", err))
	}
	token, err := key.sign(key.Alg, header, payload)
	if err != nil {
		panic(fmt.Sprintf("fake: %s sign: %v", o.alg, err))
	}
	return token
}

// with returns a copy of claims with the given members replaced.
func with(claims map[string]any, kv ...any) map[string]any {
	c := maps.Clone(claims)
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(string)] = kv[i+1]
	}
	return c
}

// Without returns a copy of claims without the named members.
func Without(claims map[string]any, names ...string) map[string]any {
	c := maps.Clone(claims)
	for _, n := range names {
		delete(c, n)
	}
	return c
}

// Expired is claims, signed, with iat and nbf two hours ago and exp one hour
// ago: far outside any clock leeway.
func (f *IdP) Expired(claims map[string]any) string {
	now := f.Now().Unix()
	return f.Mint(with(claims, "iat", now-7200, "nbf", now-7200, "exp", now-3600))
}

// NotYetValid is claims, signed, with nbf an hour from now.
func (f *IdP) NotYetValid(claims map[string]any) string {
	now := f.Now().Unix()
	return f.Mint(with(claims, "iat", now, "nbf", now+3600, "exp", now+7200))
}

// WrongIssuer is claims, signed, with another iss.
func (f *IdP) WrongIssuer(claims map[string]any) string {
	return f.Mint(with(claims, "iss", "https://evil.example.test/"))
}

// WrongAudience is claims, signed, with another aud.
func (f *IdP) WrongAudience(claims map[string]any) string {
	return f.Mint(with(claims, "aud", "another-api"))
}

// UnknownKid is claims signed by the RSA key under a kid the JWKS does not
// publish.
func (f *IdP) UnknownKid(claims map[string]any) string {
	return f.Mint(claims, WithKeyID("kid-nobody-published"))
}

// AlgNone is claims with header alg "none", the RSA kid, and an empty
// signature segment (RFC 7519 unsecured JWT). withSignature puts a
// non-empty bogus signature segment instead, which gets past a
// compact-format check to the algorithm check.
func (f *IdP) AlgNone(claims map[string]any, withSignature bool) string {
	header := map[string]any{"alg": "none", "typ": "JWT", "kid": RSAKeyID}
	return compact(header, mustJSON(claims), func(string) []byte {
		if withSignature {
			return []byte("no-signature")
		}
		return nil
	})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fake: marshal: %v", err))
	}
	return b
}

// PublicKeyForm is how the RSA public key is written when it is misused as
// an HMAC secret.
type PublicKeyForm int

// Public key encodings for HS256WithPublicKey.
const (
	PublicKeyPEM      PublicKeyForm = iota // PKIX, PEM-armoured ("-----BEGIN PUBLIC KEY-----")
	PublicKeyDER                           // PKIX, DER
	PublicKeyPKCS1PEM                      // PKCS #1, PEM-armoured ("-----BEGIN RSA PUBLIC KEY-----")
	PublicKeyJWK                           // the JWKS entry's JSON
)

// HS256WithPublicKey is the algorithm-confusion attack: claims signed with
// HMAC-SHA256 keyed with the published RSA public key's bytes, header alg
// HS256 and the RSA kid.
func (f *IdP) HS256WithPublicKey(claims map[string]any, form PublicKeyForm) string {
	pub := &f.rsa.Private.(*rsa.PrivateKey).PublicKey
	var secret []byte
	switch form {
	case PublicKeyPEM, PublicKeyDER:
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			panic(fmt.Sprintf("fake: marshal public key: %v", err))
		}
		secret = der
		if form == PublicKeyPEM {
			secret = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
		}
	case PublicKeyPKCS1PEM:
		secret = pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(pub)})
	case PublicKeyJWK:
		k, err := jwk.FromRaw(pub)
		if err == nil {
			_ = k.Set(jwk.KeyIDKey, RSAKeyID)
			secret, err = json.Marshal(k)
		}
		if err != nil {
			panic(fmt.Sprintf("fake: public key as JWK: %v", err))
		}
	}
	header := map[string]any{"alg": "HS256", "typ": "JWT", "kid": RSAKeyID}
	return compact(header, mustJSON(claims), func(input string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(input))
		return m.Sum(nil)
	})
}

// Tampered is a token signed for claims whose payload was then replaced by
// other's: the signature no longer matches.
func (f *IdP) Tampered(claims, other map[string]any) string {
	parts := strings.Split(f.Mint(claims), ".")
	parts[1] = segment(other)
	return strings.Join(parts, ".")
}

// GarbageTokens are bearer values that are not JWTs at all, by name.
func GarbageTokens() map[string]string {
	return map[string]string{
		"word":               "not-a-jwt",
		"three segments":     "aaaa.bbbb.cccc",
		"two segments":       "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0",
		"empty segments":     "..",
		"not base64url":      "eyJhbGciOiJSUzI1NiJ9.e30.a+b/c=",
		"json serialization": `{"payload":"e30","signatures":[]}`,
	}
}

// PayloadOf decodes a compact JWT's claims without verifying anything, for
// inspecting what a server minted.
func PayloadOf(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3, "not a compact JWS: %q", token)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims map[string]any
	require.NoError(t, json.Unmarshal(raw, &claims))
	return claims
}
