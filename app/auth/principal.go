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
	// DisableStamp is set only for a token of this server's built-in issuer (its signature
	// verified with the issuer's own key) that carries the disable stamp: the user's last
	// disable time as the store held it when the token was minted, zero when the user had
	// never been disabled. Nil for every other token.
	DisableStamp *time.Time
}

// IssuedBeforeDisable reports whether the token may have been issued before its user was last
// disabled, at disabledAt (zero when never): such a token is void, also once the user is
// enabled again (spec 3.2).
//
// A token of the built-in issuer carries its disable stamp, and the rule is exact: the token
// is void unless the stamp is the current disabledAt. The issuer mints only for a user it
// has just read as enabled, and takes the stamp from that same read, so a stamp equal to
// disabledAt proves the token was minted after the last disable's enable; a disable since
// then (or one racing with the mint) leaves a newer disabledAt behind, because the store
// makes every disable time later than the one before. Neither clocks nor the whole seconds
// of "iat" take part, so a token minted right after an enable, even in the second of the
// disable, on any replica, is accepted at once; and no leeway is needed.
//
// Any other token (an external identity provider's, or the built-in issuer's from before
// the stamp existed) is judged by "iat", which counts whole seconds and which the verifier
// accepts up to leeway in the future, from an issuer whose clock runs ahead: so it is void
// unless its "iat" is more than leeway after the second of the disable. A token minted right
// after an enable is refused until then: the safe side. A token without "iat" is void for a
// user that was ever disabled, since nothing shows it is newer.
func (p *Principal) IssuedBeforeDisable(disabledAt time.Time, leeway time.Duration) bool {
	if disabledAt.IsZero() {
		return false
	}
	if p.DisableStamp != nil {
		return p.DisableStamp.UnixMicro() != disabledAt.UnixMicro()
	}
	return p.IssuedAt.IsZero() || !p.IssuedAt.After(disabledAt.Truncate(time.Second).Add(leeway))
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
