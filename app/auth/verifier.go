package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jws"
	"github.com/lestrrat-go/jwx/v2/jwt"
)

// Defaults applied by NewVerifier to zero VerifierConfig fields.
const (
	DefaultScopeClaim  = "scope"
	DefaultMinRefresh  = 5 * time.Minute
	DefaultCacheSize   = 10000
	DefaultHTTPTimeout = 10 * time.Second
)

const (
	maxTokenBytes       = 16 << 10 // longer bearer tokens are refused without parsing
	maxBackgroundWindow = 15 * time.Minute
	orgIDClaim          = "org_id"
)

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	JWKSURL    string
	Issuer     string
	Audience   string
	ScopeClaim string        // "scope" (space-separated string) or "scp"/"permissions" (array of strings); either form is accepted in any claim. Default "scope".
	Leeway     time.Duration // clock skew allowed on exp/nbf/iat
	MinRefresh time.Duration // minimum interval between JWKS fetches while a usable key is loaded, whoever asks; default 5m. While none is, the interval backs off from 1s up to MinRefresh.
	HTTPClient *http.Client  // nil = a client with a 10s timeout; a custom client needs a timeout too. Redirects are never followed.
	Now        func() time.Time
	CacheSize  int // max remembered tokens; 0 = 10000, negative disables the cache
	// Observe, when set, is called once per Verify with its result:
	// ResultCacheHit, ResultVerified or ResultRefused (for metrics).
	Observe func(result string)
	// Builtin is this server's built-in issuer, nil when it is off. A token whose signature
	// verifies with its key, wherever the JWKS came from, gets its disable stamp read
	// (Principal.DisableStamp); other tokens never do.
	Builtin *Issuer
}

// The results Verify reports to VerifierConfig.Observe.
const (
	ResultCacheHit = "cache_hit" // a token verified before, still valid
	ResultVerified = "verified"  // a token verified now
	ResultRefused  = "refused"   // a token refused
)

// Verifier verifies bearer tokens against the JWKS at VerifierConfig.JWKSURL and remembers
// verified tokens until they expire. It is safe for concurrent use.
//
// Locks: keysMu serialises publishing key snapshots; fetchMu guards the fetch limiter
// (fetchKeys). Both are leaves: no lock is taken while either is held, and neither is held
// during a fetch. Cache shard locks are leaves too.
type Verifier struct {
	jwksURL    string
	scopeClaim string
	leeway     time.Duration
	minRefresh time.Duration
	now        func() time.Time
	observe    func(result string)
	builtin    *Issuer
	jwks       *jwk.Cache
	parseOpts  []jwt.ParseOption
	cache      *tokenCache // nil when disabled
	// issuer and audience are the required "iss" and "aud"; fast reports
	// whether verifyFast may run (fastverify.go).
	issuer, audience string
	fast             bool
	lastHeader       atomic.Pointer[headerMemo] // fastHeader's
	// ctx is NewVerifier's: it bounds the background refresh and fetches in flight.
	ctx context.Context

	keys   atomic.Pointer[keyState] // nil until the first successful fetch
	keysMu sync.Mutex               // serialises postFetch

	fetchMu   sync.Mutex
	inflight  *fetchCall    // guarded by fetchMu; the fetch running, nil when none
	nextFetch time.Time     // guarded by fetchMu; no fetch starts before
	backoff   time.Duration // guarded by fetchMu; the interval after a fetch leaving no usable key
	lastErr   error         // guarded by fetchMu; the last fetch's error, nil after a success
}

// NewVerifier registers cfg.JWKSURL with a jwk.Cache. It does no network I/O: the URL need not
// be reachable yet (the built-in issuer's listener may not be serving). Keys are fetched on
// first use or by Ready, then refreshed in the background; the background work and any
// fetch in flight stop when ctx is cancelled.
func NewVerifier(ctx context.Context, cfg VerifierConfig) (*Verifier, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	v := &Verifier{
		jwksURL:    cfg.JWKSURL,
		scopeClaim: cfg.ScopeClaim,
		leeway:     cfg.Leeway,
		minRefresh: cfg.MinRefresh,
		now:        cfg.Now,
		observe:    cfg.Observe,
		ctx:        ctx,
		backoff:    minFetchBackoff,
		builtin:    cfg.Builtin,
		issuer:     cfg.Issuer,
		audience:   cfg.Audience,
	}
	if v.scopeClaim == "" {
		v.scopeClaim = DefaultScopeClaim
	}
	v.fast = !registeredClaims[v.scopeClaim] && !registeredClaims[orgIDClaim] && !registeredClaims[disableStampClaim]
	if v.minRefresh == 0 {
		v.minRefresh = DefaultMinRefresh
	}
	if v.now == nil {
		v.now = time.Now
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	switch size := cfg.CacheSize; {
	case size == 0:
		v.cache = newTokenCache(DefaultCacheSize)
	case size > 0:
		v.cache = newTokenCache(size)
	}

	// jwk.Cache wakes up every window and refetches sets older than MinRefresh (or the
	// response's Cache-Control max-age, when longer).
	window := min(max(v.minRefresh, time.Second), maxBackgroundWindow)
	v.jwks = jwk.NewCache(ctx, jwk.WithRefreshWindow(window))
	if err := v.jwks.Register(cfg.JWKSURL,
		jwk.WithMinRefreshInterval(v.minRefresh),
		jwk.WithHTTPClient(newJWKSClient(client)),
		jwk.WithPostFetcher(jwk.PostFetchFunc(v.postFetch)),
	); err != nil {
		return nil, fmt.Errorf("auth: register jwks url: %w", err)
	}

	v.parseOpts = []jwt.ParseOption{
		jwt.WithValidate(true),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
		jwt.WithRequiredClaim(jwt.SubjectKey),
		jwt.WithAcceptableSkew(v.leeway),
		jwt.WithClock(jwt.ClockFunc(v.now)),
	}
	return v, nil
}

func (c *VerifierConfig) validate() error {
	var errs []error
	// Plain http is accepted here: the built-in issuer's keys are read in-process under an
	// http URL. config.Validate refuses plain http for auth.jwks_url unless the host is a
	// loopback one.
	if c.JWKSURL == "" {
		errs = append(errs, errors.New("auth: jwks url is required"))
	} else if u, err := url.Parse(c.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("auth: jwks url %q must be an absolute http(s) URL", c.JWKSURL))
	}
	if c.Issuer == "" {
		errs = append(errs, errors.New("auth: issuer is required"))
	}
	if c.Audience == "" {
		errs = append(errs, errors.New("auth: audience is required"))
	}
	if c.Leeway < 0 {
		errs = append(errs, errors.New("auth: leeway must not be negative"))
	}
	if c.MinRefresh < 0 {
		errs = append(errs, errors.New("auth: min refresh must not be negative"))
	}
	return errors.Join(errs...)
}

// Ready returns nil once a key set with a usable key is loaded. While none is, it asks for a
// fetch through the limiter every fetch goes through (one at a time, at a minimum interval,
// whoever asks), and waits only for a fetch it started itself: a readiness probe,
// anonymous on the partner listener, can neither add fetches nor make token checks queue
// behind its own. It asks at all because an instance that is not ready gets no traffic, so
// without it an instance whose identity provider was away at start would wait for the
// background refresh, up to MinRefresh.
func (v *Verifier) Ready(ctx context.Context) error {
	st := v.keys.Load()
	if st.usable() {
		return nil
	}
	st, err := v.fetchKeys(ctx, st, false)
	if err != nil {
		return fmt.Errorf("auth: jwks not ready: %w", err)
	}
	if !st.usable() {
		return errors.New("auth: jwks not ready: the key set has no usable signing key")
	}
	return nil
}

// Forget drops token from the cache, so its next use is verified in full. A Verify of the
// same token running concurrently may remember it again.
func (v *Verifier) Forget(token string) {
	if v.cache != nil {
		v.cache.forget(keyOf(token))
	}
}

// Verify checks token and returns its principal. Every failure wraps ErrInvalidToken.
//
// A token verified once is remembered until it expires, so repeated calls cost a hash and a
// map lookup; exp and nbf are checked again on every call, with the configured leeway. The
// returned Principal is shared and must not be modified.
func (v *Verifier) Verify(ctx context.Context, token string) (*Principal, error) {
	p, hit, err := v.check(ctx, token)
	if v.observe != nil {
		switch {
		case err != nil:
			v.observe(ResultRefused)
		case hit:
			v.observe(ResultCacheHit)
		default:
			v.observe(ResultVerified)
		}
	}
	return p, err
}

// check is Verify; hit reports a token found in the cache.
func (v *Verifier) check(ctx context.Context, token string) (_ *Principal, hit bool, _ error) {
	if len(token) > maxTokenBytes {
		return nil, false, invalid(fmt.Errorf("%w: longer than %d bytes", errMalformedJWT, maxTokenBytes))
	}
	now := v.now()
	var key tokenKey
	if v.cache != nil {
		// A hit means the token is byte for byte one that passed every check below, so the
		// format check can wait for a miss.
		key = keyOf(token)
		var gen uint64
		if st := v.keys.Load(); st != nil {
			gen = st.gen
		}
		switch p, res := v.cache.get(key, now, gen); res {
		case cacheHit:
			return p, true, nil
		case cacheExpired:
			return nil, false, invalid(errExpired)
		case cacheNotYetValid:
			return nil, false, invalid(errNotYetValid)
		}
	}
	if err := checkCompact(token); err != nil {
		return nil, false, invalid(err)
	}
	e, err := v.verify(ctx, token, now)
	if err != nil {
		return nil, false, invalid(err)
	}
	if v.cache != nil {
		v.cache.put(key, e, now)
	}
	return e.p, false, nil
}

// Failure reasons; they end up in logs, wrapped under ErrInvalidToken.
var (
	errExpired      = errors.New("token expired")
	errNotYetValid  = errors.New("token not valid yet")
	errIssuedLater  = errors.New("token issued in the future")
	errIssuer       = errors.New("issuer mismatch")
	errAudience     = errors.New("audience mismatch")
	errSignature    = errors.New("signature verification failed")
	errMissingKid   = errors.New("missing kid header")
	errCrit         = errors.New("unsupported crit header")
	errMissingSub   = errors.New("missing sub claim")
	errMissingExp   = errors.New("missing exp claim")
	errMalformedJWT = errors.New("malformed token")
)

func invalid(reason error) error {
	return fmt.Errorf("%w: %w", ErrInvalidToken, reason)
}

// checkCompact accepts only the compact serialisation: three non-empty base64url segments.
// It refuses JSON serialisations and JWEs before any parsing.
func checkCompact(token string) error {
	dots, segLen := 0, 0
	for i := 0; i < len(token); i++ {
		switch c := token[i]; {
		case base64URLByte[c]:
			segLen++
		case c == '.':
			if segLen == 0 {
				return fmt.Errorf("%w: empty segment", errMalformedJWT)
			}
			dots++
			segLen = 0
		default:
			return fmt.Errorf("%w: not base64url", errMalformedJWT)
		}
	}
	if dots != 2 || segLen == 0 {
		return fmt.Errorf("%w: not a compact JWS", errMalformedJWT)
	}
	return nil
}

// base64URLByte marks the bytes of the base64url alphabet: a table
// lookup instead of a switch of ranges per byte, which was a twentieth
// of a token's first use (make bench-read's rotating measure, perf
// profile).
var base64URLByte = func() (t [256]bool) {
	for c := range t {
		t[c] = 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
	}
	return t
}()

// verify runs the full verification of token at now.
func (v *Verifier) verify(ctx context.Context, token string, now time.Time) (cacheEntry, error) {
	if e, done, err := v.verifyFast(ctx, token, now); done {
		return e, err
	}
	var (
		kpErr error
		gen   uint64
		used  verifyKey // the key the signature was checked with
	)
	// jwt.Parse gives key providers a background context; this closure carries ctx to the
	// JWKS refresh and reports why no key was provided.
	kp := jws.KeyProviderFunc(func(_ context.Context, sink jws.KeySink, sig *jws.Signature, _ *jws.Message) error {
		h := sig.ProtectedHeaders()
		alg := h.Algorithm()
		switch {
		case !allowedAlg(alg):
			kpErr = fmt.Errorf("algorithm %q not allowed", clip(alg.String()))
		case len(h.Critical()) > 0:
			kpErr = errCrit
		case h.KeyID() == "":
			kpErr = errMissingKid
		default:
			var k verifyKey
			if k, gen, kpErr = v.lookupKey(ctx, h.KeyID(), alg); kpErr == nil {
				used = k
				sink.Key(alg, k.raw)
			}
		}
		return kpErr
	})
	opts := make([]jwt.ParseOption, 0, len(v.parseOpts)+1)
	opts = append(opts, v.parseOpts...)
	opts = append(opts, jwt.WithKeyProvider(kp))
	tok, err := jwt.ParseString(token, opts...)
	if err != nil {
		if kpErr != nil {
			return cacheEntry{}, kpErr
		}
		return cacheEntry{}, classify(err)
	}
	e, err := v.entry(tok, v.builtin != nil && v.builtin.signedWith(used.raw))
	if err != nil {
		return cacheEntry{}, err
	}
	e.gen = gen
	// jwt.Validate checked the times already; checking again here with the cache's own rule
	// keeps the first call and cache hits consistent (and refuses exp <= 0, which jwx skips).
	if !now.Before(e.until) {
		return cacheEntry{}, errExpired
	}
	if now.Before(e.from) {
		return cacheEntry{}, errNotYetValid
	}
	return e, nil
}

// lookupKey finds the key for kid and alg, fetching the JWKS (through fetchKeys' limiter)
// when no key set is loaded or the kid is unknown. It also returns the generation of the
// snapshot the key came from.
func (v *Verifier) lookupKey(ctx context.Context, kid string, alg jwa.SignatureAlgorithm) (verifyKey, uint64, error) {
	st := v.keys.Load()
	if st != nil {
		k, found, known := st.find(kid, alg)
		if found || known {
			return k, st.gen, keyError(kid, alg, found)
		}
	}
	// No key set yet, or maybe the IdP rotated in a new key: look again.
	next, err := v.fetchKeys(ctx, st, true)
	if next != nil {
		k, found, known := next.find(kid, alg)
		if found || known {
			return k, next.gen, keyError(kid, alg, found)
		}
	}
	if err != nil && !next.usable() {
		return verifyKey{}, 0, err
	}
	return verifyKey{}, 0, fmt.Errorf("unknown kid %q", clip(kid))
}

// keyError is nil when a key was found for kid, and otherwise says that the kid's keys do
// not allow alg.
func keyError(kid string, alg jwa.SignatureAlgorithm, found bool) error {
	if found {
		return nil
	}
	return fmt.Errorf("key %q does not allow algorithm %s", clip(kid), alg)
}

// entry builds the cache entry for a token jwt.Parse has verified and validated; own reports
// a token signed with the built-in issuer's key.
func (v *Verifier) entry(tok claimSource, own bool) (cacheEntry, error) {
	sub := tok.Subject()
	if sub == "" {
		return cacheEntry{}, errMissingSub
	}
	exp := tok.Expiration()
	if exp.IsZero() || exp.Unix() <= 0 {
		return cacheEntry{}, errMissingExp
	}
	p := &Principal{UserID: sub, ExpiresAt: exp, IssuedAt: tok.IssuedAt(), TokenID: tok.JwtID()}
	if raw, ok := tok.Get(orgIDClaim); ok {
		s, ok := raw.(string)
		if !ok {
			return cacheEntry{}, fmt.Errorf("claim %s is not a string", orgIDClaim)
		}
		p.OrgID = s
	}
	if raw, ok := tok.Get(v.scopeClaim); ok {
		scopes, err := parseScopes(raw)
		if err != nil {
			return cacheEntry{}, fmt.Errorf("claim %s: %w", v.scopeClaim, err)
		}
		p.Scopes = scopes
	}
	if raw, ok := tok.Get(disableStampClaim); ok && own {
		stamp, err := parseStamp(raw)
		if err != nil {
			return cacheEntry{}, fmt.Errorf("claim %s: %w", disableStampClaim, err)
		}
		p.DisableStamp = &stamp
	}
	from := tok.NotBefore()
	if iat := tok.IssuedAt(); iat.After(from) {
		from = iat
	}
	e := cacheEntry{p: p, until: exp.Add(v.leeway)}
	if !from.IsZero() {
		e.from = from.Add(-v.leeway)
	}
	return e, nil
}

// claimSource is what entry reads of a verified token: a jwt.Token, or
// the fast path's fastClaims.
type claimSource interface {
	Subject() string
	Expiration() time.Time
	IssuedAt() time.Time
	NotBefore() time.Time
	JwtID() string
	Get(name string) (any, bool)
}

// parseScopes accepts a space-separated string or an array of strings (each of which may
// itself be space-separated).
func parseScopes(raw any) ([]string, error) {
	switch x := raw.(type) {
	case string:
		return strings.Fields(x), nil
	case []any:
		scopes := make([]string, 0, len(x))
		for _, item := range x {
			s, ok := item.(string)
			if !ok {
				return nil, errors.New("array holds a non-string")
			}
			scopes = append(scopes, strings.Fields(s)...)
		}
		return scopes, nil
	case []string:
		scopes := make([]string, 0, len(x))
		for _, s := range x {
			scopes = append(scopes, strings.Fields(s)...)
		}
		return scopes, nil
	}
	return nil, fmt.Errorf("unexpected type %T", raw)
}

// parseStamp reads the disable stamp claim: Unix microseconds, 0 for the zero time. JSON
// numbers decode as float64, exact for every microsecond count up to 2^53 (the year 2255).
func parseStamp(raw any) (time.Time, error) {
	var n int64
	switch x := raw.(type) {
	case float64:
		if x < 0 || x > 1<<53 || x != math.Trunc(x) {
			return time.Time{}, errors.New("not a whole number of microseconds")
		}
		n = int64(x)
	case json.Number:
		var err error
		if n, err = x.Int64(); err != nil || n < 0 {
			return time.Time{}, errors.New("not a whole number of microseconds")
		}
	default:
		return time.Time{}, fmt.Errorf("unexpected type %T", raw)
	}
	if n == 0 {
		return time.Time{}, nil
	}
	return time.UnixMicro(n).UTC(), nil
}

// classify turns a jwx parse or validation error into a reason safe to log.
func classify(err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired()):
		return errExpired
	case errors.Is(err, jwt.ErrTokenNotYetValid()):
		return errNotYetValid
	case errors.Is(err, jwt.ErrInvalidIssuedAt()):
		return errIssuedLater
	case errors.Is(err, jwt.ErrInvalidIssuer()):
		return errIssuer
	case errors.Is(err, jwt.ErrInvalidAudience()):
		return errAudience
	case errors.Is(err, jwt.ErrRequiredClaim()):
		return fmt.Errorf("missing required claim: %v", err)
	case jws.IsVerificationError(err):
		return errSignature
	}
	return fmt.Errorf("%w: %v", errMalformedJWT, err)
}

// clip bounds attacker-chosen header values before they reach an error message.
func clip(s string) string {
	const limit = 64
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}
