package auth

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwk"
	"github.com/lestrrat-go/jwx/v2/jwt"
)

const issuerKeyBits = 2048

// disableStampClaim carries a built-in token's disable stamp (Principal.DisableStamp): the
// user's DisabledAt when the token was minted, in Unix microseconds (the stores keep
// microseconds), 0 when the user had never been disabled. The verifier reads it only from
// tokens signed with the built-in issuer's own key: "iss" cannot tell the built-in issuer
// from an identity provider configured with the same auth.issuer, a key can.
const disableStampClaim = "rxgate_disabled_at"

// GenerateKey returns a new RSA-2048 private key as JWK JSON, with kid (its RFC 7638 SHA-256
// thumbprint, base64url) and alg RS256. The caller persists it and passes it to NewIssuer.
func GenerateKey() ([]byte, error) {
	priv, err := rsa.GenerateKey(rand.Reader, issuerKeyBits)
	if err != nil {
		return nil, fmt.Errorf("auth: generate rsa key: %w", err)
	}
	k, err := jwk.FromRaw(priv)
	if err != nil {
		return nil, fmt.Errorf("auth: convert rsa key: %w", err)
	}
	if err := setKeyID(k); err != nil {
		return nil, err
	}
	if err := k.Set(jwk.AlgorithmKey, jwa.RS256); err != nil {
		return nil, fmt.Errorf("auth: set alg: %w", err)
	}
	if err := k.Set(jwk.KeyUsageKey, jwk.ForSignature); err != nil {
		return nil, fmt.Errorf("auth: set use: %w", err)
	}
	buf, err := json.Marshal(k)
	if err != nil {
		return nil, fmt.Errorf("auth: marshal key: %w", err)
	}
	return buf, nil
}

// setKeyID sets kid to the RFC 7638 SHA-256 thumbprint, base64url without padding.
func setKeyID(k jwk.Key) error {
	tp, err := k.Thumbprint(crypto.SHA256)
	if err != nil {
		return fmt.Errorf("auth: key thumbprint: %w", err)
	}
	if err := k.Set(jwk.KeyIDKey, base64.RawURLEncoding.EncodeToString(tp)); err != nil {
		return fmt.Errorf("auth: set kid: %w", err)
	}
	return nil
}

// Issuer mints RS256 tokens for the built-in issuer with a private key the caller persists.
// It is safe for concurrent use.
type Issuer struct {
	key      jwk.Key // private, with kid and alg RS256; never modified after NewIssuer
	pub      *rsa.PublicKey
	issuer   string
	audience string
	now      func() time.Time
	jwks     []byte
}

// NewIssuer loads privateJWK (an RSA private key of at least 2048 bits, as written by
// GenerateKey). A key without kid gets its thumbprint; a key whose alg is not RS256 is
// refused. now nil means time.Now.
func NewIssuer(privateJWK []byte, issuer, audience string, now func() time.Time) (*Issuer, error) {
	if issuer == "" || audience == "" {
		return nil, errors.New("auth: issuer and audience are required")
	}
	k, err := jwk.ParseKey(privateJWK)
	if err != nil {
		return nil, fmt.Errorf("auth: parse issuer key: %w", err)
	}
	var priv rsa.PrivateKey
	if k.KeyType() != jwa.RSA || k.Raw(&priv) != nil {
		return nil, errors.New("auth: issuer key must be an RSA private key")
	}
	if err := priv.Validate(); err != nil {
		return nil, fmt.Errorf("auth: issuer key: %w", err)
	}
	if bits := priv.N.BitLen(); bits < minRSAKeyBits {
		return nil, fmt.Errorf("auth: issuer key has %d bits, need at least %d", bits, minRSAKeyBits)
	}
	if alg := k.Algorithm().String(); alg != "" && alg != jwa.RS256.String() {
		return nil, fmt.Errorf("auth: issuer key alg is %q, want RS256", alg)
	}
	if k.KeyID() == "" {
		if err := setKeyID(k); err != nil {
			return nil, err
		}
	}
	if err := k.Set(jwk.AlgorithmKey, jwa.RS256); err != nil {
		return nil, fmt.Errorf("auth: set alg: %w", err)
	}

	pub, err := k.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("auth: derive public key: %w", err)
	}
	if err := pub.Set(jwk.KeyUsageKey, jwk.ForSignature); err != nil {
		return nil, fmt.Errorf("auth: set use: %w", err)
	}
	set := jwk.NewSet()
	if err := set.AddKey(pub); err != nil {
		return nil, fmt.Errorf("auth: build jwks: %w", err)
	}
	jwks, err := json.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("auth: marshal jwks: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &Issuer{key: k, pub: &priv.PublicKey, issuer: issuer, audience: audience, now: now, jwks: jwks}, nil
}

// MintRequest describes a token to mint.
type MintRequest struct {
	UserID string
	OrgID  string // omitted from the token when ""
	Scopes []string
	TTL    time.Duration
	// DisabledAt is the user's DisabledAt (zero when never disabled), taken from the same
	// store read that found the user enabled; the token carries it as its disable stamp
	// (see Principal.IssuedBeforeDisable). Taken from any other read, or for a user read as
	// disabled, it could carry a token across a disable.
	DisabledAt time.Time
}

// Mint signs a token with claims iss, aud, sub, org_id, scope (space-separated), iat, nbf,
// exp, jti (a random UUID) and the disable stamp, and header kid, alg RS256 and typ JWT.
// expiresAt is the token's exp, which is whole seconds.
func (i *Issuer) Mint(r MintRequest) (token string, expiresAt time.Time, err error) {
	if r.UserID == "" {
		return "", time.Time{}, errors.New("auth: mint: user id is required")
	}
	if r.TTL < time.Second {
		return "", time.Time{}, errors.New("auth: mint: ttl must be at least a second")
	}
	for _, s := range r.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\r\n") {
			return "", time.Time{}, fmt.Errorf("auth: mint: invalid scope %q", s)
		}
	}
	now := i.now().Truncate(time.Second)
	expiresAt = now.Add(r.TTL).Truncate(time.Second)
	b := jwt.NewBuilder().
		Issuer(i.issuer).
		Audience([]string{i.audience}).
		Subject(r.UserID).
		IssuedAt(now).
		NotBefore(now).
		Expiration(expiresAt).
		JwtID(uuid.NewString()).
		Claim(disableStampClaim, stampOf(r.DisabledAt))
	if r.OrgID != "" {
		b = b.Claim(orgIDClaim, r.OrgID)
	}
	if len(r.Scopes) > 0 {
		b = b.Claim(DefaultScopeClaim, strings.Join(r.Scopes, " "))
	}
	tok, err := b.Build()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("auth: mint: build token: %w", err)
	}
	// jwt.Sign adds kid from the key and typ JWT.
	signed, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256, i.key))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("auth: mint: sign: %w", err)
	}
	return string(signed), expiresAt, nil
}

// stampOf is the disable stamp claim's value for disabledAt.
func stampOf(disabledAt time.Time) int64 {
	if disabledAt.IsZero() {
		return 0
	}
	return disabledAt.UnixMicro()
}

// signedWith reports whether raw, the key a token's signature was verified with, is this
// issuer's own public key: only then was the token minted here.
func (i *Issuer) signedWith(raw any) bool {
	pk, ok := raw.(*rsa.PublicKey)
	return ok && i.pub.Equal(pk)
}

// KeyID returns the kid of the signing key.
func (i *Issuer) KeyID() string {
	return i.key.KeyID()
}

// JWKS returns the public key set as JSON, to be served at /.well-known/jwks.json.
// The bytes are computed once; each call returns a copy.
func (i *Issuer) JWKS() []byte {
	return bytes.Clone(i.jwks)
}
