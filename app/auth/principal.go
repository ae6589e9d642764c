// Package auth verifies partner bearer tokens against a JWKS and mints tokens for the built-in issuer.
//
// It knows nothing about HTTP frameworks: the app package's middleware extracts the bearer
// token, calls Verifier.Verify and maps ErrInvalidToken to 401.
package auth

import (
	"errors"
	"time"
)

// ErrInvalidToken is wrapped by every verification failure. The wrapped reason is meant for
// logs only; it never contains the token, and clients must only ever see a generic 401.
var ErrInvalidToken = errors.New("auth: invalid token")

// Principal is what a verified token says about its caller.
//
// Principals returned by Verifier.Verify are shared between every request presenting the same
// token and must be treated as read-only, including the Scopes slice.
type Principal struct {
	UserID    string // "sub"
	OrgID     string // "org_id" claim, "" when the token has none (external IdPs)
	Scopes    []string
	ExpiresAt time.Time
	IssuedAt  time.Time // "iat", zero when the token has none
	TokenID   string    // "jti", may be ""
}

// HasScope reports whether the token carries at least one of names.
func (p *Principal) HasScope(names ...string) bool {
	for _, have := range p.Scopes {
		for _, want := range names {
			if have == want {
				return true
			}
		}
	}
	return false
}
