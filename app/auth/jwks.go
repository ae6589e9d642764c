package auth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
)

const (
	maxJWKSBytes  = 1 << 20 // a JWKS response larger than this is refused
	minRSAKeyBits = 2048
)

// errNoKeys is returned while no usable key is loaded.
var errNoKeys = errors.New("no usable key loaded")

// allowedAlg reports whether alg is one of the asymmetric signature algorithms tokens may use.
// Anything else (none, HS*, ES256K, ...) is refused before any key is looked at.
func allowedAlg(alg jwa.SignatureAlgorithm) bool {
	switch alg {
	case jwa.RS256, jwa.RS384, jwa.RS512,
		jwa.PS256, jwa.PS384, jwa.PS512,
		jwa.ES256, jwa.ES384, jwa.ES512,
		jwa.EdDSA:
		return true
	}
	return false
}

// keyFits reports whether raw is a public key of the type and curve alg needs.
func keyFits(alg jwa.SignatureAlgorithm, raw any) bool {
	switch k := raw.(type) {
	case *rsa.PublicKey:
		switch alg {
		case jwa.RS256, jwa.RS384, jwa.RS512, jwa.PS256, jwa.PS384, jwa.PS512:
			return true
		}
	case *ecdsa.PublicKey:
		switch alg {
		case jwa.ES256:
			return k.Curve == elliptic.P256()
		case jwa.ES384:
			return k.Curve == elliptic.P384()
		case jwa.ES512:
			return k.Curve == elliptic.P521()
		}
	case ed25519.PublicKey:
		return alg == jwa.EdDSA
	}
	return false
}

// verifyKey is one JWKS entry prepared for signature verification.
type verifyKey struct {
	alg   jwa.SignatureAlgorithm // "" when the JWK names none: any algorithm fitting the key type
	raw   any                    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
	thumb string                 // RFC 7638 thumbprint, to notice a kid whose key changed
}

// keyState is an immutable snapshot of the usable keys of one JWKS fetch.
type keyState struct {
	byKid map[string][]verifyKey
	// gen increases whenever a key of the previous snapshot disappeared or changed, so that
	// cached tokens verified with it are verified again. Added keys leave gen unchanged.
	gen uint64
}

// find returns the key with kid usable for alg. known reports whether kid exists at all.
func (s *keyState) find(kid string, alg jwa.SignatureAlgorithm) (key verifyKey, found, known bool) {
	keys, known := s.byKid[kid]
	for _, k := range keys {
		// The JWK's own alg, when present, must be exactly the header's.
		if (k.alg == "" || k.alg == alg) && keyFits(alg, k.raw) {
			return k, true, true
		}
	}
	return verifyKey{}, false, known
}

func (s *keyState) count() int {
	n := 0
	for _, keys := range s.byKid {
		n += len(keys)
	}
	return n
}

// covers reports whether every key of old is still in s, unchanged.
func (s *keyState) covers(old *keyState) bool {
	for kid, oldKeys := range old.byKid {
		for _, o := range oldKeys {
			if !slices.ContainsFunc(s.byKid[kid], func(n verifyKey) bool {
				return n.thumb == o.thumb && n.alg == o.alg
			}) {
				return false
			}
		}
	}
	return true
}

// prepareKeys keeps the keys of set that can verify signatures: they have a kid, are meant
// for signatures, name an allowed alg (or none), and are RSA (>= 2048 bits), P-256/384/521
// or Ed25519. Symmetric keys are never used, whatever the set contains.
func prepareKeys(set jwk.Set) map[string][]verifyKey {
	byKid := make(map[string][]verifyKey, set.Len())
	for i := range set.Len() {
		k, ok := set.Key(i)
		if !ok {
			continue
		}
		kid := k.KeyID()
		if kid == "" {
			continue
		}
		if use := k.KeyUsage(); use != "" && use != jwk.ForSignature.String() {
			continue
		}
		if ops := k.KeyOps(); len(ops) > 0 && !slices.Contains(ops, jwk.KeyOpVerify) {
			continue
		}
		var alg jwa.SignatureAlgorithm
		if a := k.Algorithm().String(); a != "" {
			alg = jwa.SignatureAlgorithm(a)
			if !allowedAlg(alg) {
				continue
			}
		}
		pub, err := k.PublicKey()
		if err != nil {
			continue
		}
		var raw any
		if err := pub.Raw(&raw); err != nil {
			continue
		}
		switch r := raw.(type) {
		case *rsa.PublicKey:
			if r.N.BitLen() < minRSAKeyBits {
				continue
			}
		case *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			continue
		}
		if alg != "" && !keyFits(alg, raw) {
			continue
		}
		thumb, err := pub.Thumbprint(crypto.SHA256)
		if err != nil {
			continue
		}
		byKid[kid] = append(byKid[kid], verifyKey{alg: alg, raw: raw, thumb: string(thumb)})
	}
	return byKid
}

// postFetch runs after every successful JWKS fetch, whether one of fetchKeys or jwk.Cache's
// periodic refresh, and publishes the new snapshot.
func (v *Verifier) postFetch(_ string, set jwk.Set) (jwk.Set, error) {
	next := &keyState{byKid: prepareKeys(set)}
	v.keysMu.Lock()
	defer v.keysMu.Unlock()
	if old := v.keys.Load(); old != nil {
		next.gen = old.gen
		if !next.covers(old) {
			next.gen++
		}
	}
	v.keys.Store(next)
	return set, nil
}

// usable reports whether s holds a key that can verify a token.
func (s *keyState) usable() bool { return s != nil && s.count() > 0 }

// minFetchBackoff is the interval after the first fetch that leaves no usable key loaded.
const minFetchBackoff = time.Second

// errFetchRunning is Ready's answer while a fetch it did not start is running.
var errFetchRunning = errors.New("a key fetch is running")

// fetchCall is one JWKS fetch, shared by every caller waiting for it.
type fetchCall struct {
	done chan struct{} // closed once st and err are set
	st   *keyState
	err  error
}

// fetchKeys fetches the JWKS, whoever asks (a token with an unknown kid or checked while no
// key is loaded, or a readiness probe, anonymous on the partner listener), and returns the
// snapshot after it. The fetches are limited, so that no caller can make the server hammer
// the identity provider or queue token checks behind fetches:
//
//   - Single flight: one fetch runs at a time. A caller arriving meanwhile shares its result
//     when join is set (token checks), or returns errFetchRunning at once (readiness).
//   - A minimum interval between the starts of two fetches: MinRefresh while a usable key is
//     loaded, as before (the IdP's keys change seldom, and a kid nobody published is more
//     often a forgery than a rotation). While none is, every token is refused, so waiting
//     MinRefresh would prolong an outage by up to that long after the IdP is back; instead
//     the interval starts at minFetchBackoff and doubles with each fetch that still leaves no
//     usable key, up to MinRefresh, so an IdP that stays away is asked no more often than a
//     healthy one in the long run.
//
// seen is the snapshot the caller looked at: if a newer one is loaded, it is returned at once
// without fetching. A limited caller gets the current snapshot, with errNoKeys (wrapping the
// last fetch's error) unless it holds a usable key.
func (v *Verifier) fetchKeys(ctx context.Context, seen *keyState, join bool) (*keyState, error) {
	v.fetchMu.Lock()
	cur := v.keys.Load()
	if cur != seen {
		v.fetchMu.Unlock()
		return cur, nil
	}
	now := v.now()
	c := v.inflight
	switch {
	case c != nil:
		v.fetchMu.Unlock()
		if !join {
			return cur, errFetchRunning
		}
	case now.Before(v.nextFetch):
		last := v.lastErr
		v.fetchMu.Unlock()
		if cur.usable() {
			return cur, nil
		}
		return cur, noKeys(last)
	default:
		c = &fetchCall{done: make(chan struct{})}
		v.inflight = c
		v.fetchMu.Unlock()
		// The fetch runs on its own goroutine, under the Verifier's context rather than the
		// caller's, so that a caller going away (a probe that hangs up) does not fail the
		// fetch for the others. It ends with the fetch, which the HTTP client's timeout
		// bounds, or when NewVerifier's context is cancelled.
		go v.runFetch(c, now)
	}
	select {
	case <-c.done:
		return c.st, c.err
	case <-ctx.Done():
		return cur, ctx.Err()
	}
}

// runFetch runs the fetch c, started at start, and sets when the next one may start.
func (v *Verifier) runFetch(c *fetchCall, start time.Time) {
	_, err := v.jwks.Refresh(v.ctx, v.jwksURL)
	if err != nil {
		err = newFetchError(err, v.jwksURL)
	}
	st := v.keys.Load()

	v.fetchMu.Lock()
	interval := v.minRefresh
	if st.usable() {
		v.backoff = minFetchBackoff
	} else {
		interval = min(v.backoff, v.minRefresh)
		v.backoff = min(2*v.backoff, v.minRefresh)
	}
	v.nextFetch = start.Add(interval)
	v.lastErr = err
	v.inflight = nil
	c.st = st
	switch {
	case err != nil && st.usable():
		c.err = fmt.Errorf("refresh jwks: %w", err)
	case err != nil:
		c.err = noKeys(err)
	}
	v.fetchMu.Unlock()
	close(c.done)
}

// noKeys is errNoKeys, wrapping why the last fetch failed when it did.
func noKeys(last error) error {
	if last == nil {
		return errNoKeys
	}
	return fmt.Errorf("%w: %w", errNoKeys, last)
}

var _ jwk.HTTPClient = jwksClient{}

// jwksClient fetches the JWKS for jwk.Cache. It bounds the response size and always closes
// the connection's body: jwk.Cache's transformer does neither. It follows no redirect: see
// newJWKSClient.
type jwksClient struct {
	c *http.Client
}

// newJWKSClient returns a jwksClient using a copy of c that follows no redirect. A redirect
// would let whoever answers at the configured URL, or anyone on the path of a plain-http
// hop (https to http included), choose where the keys come from, and so forge tokens for
// any user. The caller's client keeps its own policy.
func newJWKSClient(c *http.Client) jwksClient {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return jwksClient{c: &cc}
}

func (c jwksClient) Get(u string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		return nil, redactURLError(err)
	}
	req.Header.Set("Accept", "application/json")
	res, err := c.c.Do(req)
	if err != nil {
		return nil, redactURLError(err)
	}
	defer res.Body.Close()
	if res.StatusCode >= 300 && res.StatusCode < 400 {
		// The Location is not quoted: it is the answerer's choice, not the operator's.
		return nil, fmt.Errorf("jwks url answered %q: redirects are not followed", res.Status)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("jwks response exceeds %d bytes", maxJWKSBytes)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// redactURL returns raw without its user info, query and fragment, which may hold a
// credential of the identity provider, for logs and errors.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// redactURLError redacts the URL of a *url.Error, as net/http returns them.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: redactURL(ue.URL), Err: ue.Err}
	}
	return err
}

// fetchError is a failed JWKS fetch described without the URL's user info, query and
// fragment: jwk.Cache quotes the whole URL in its errors.
type fetchError struct {
	msg string
	err error
}

func newFetchError(err error, rawURL string) error {
	return &fetchError{msg: strings.ReplaceAll(err.Error(), rawURL, redactURL(rawURL)), err: err}
}

func (e *fetchError) Error() string { return e.msg }
func (e *fetchError) Unwrap() error { return e.err }
