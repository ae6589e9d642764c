package app

import (
	"time"

	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/storage"
)

const ctxCaller = "rxgate.caller"

// caller is the authenticated party of a partner request: the verified
// token, the path's organization and the token's user, read from the
// store on every request, or taken from the member cache when the store's
// change stamps show neither changed since (member_cache.go): so a user
// disabled or a secret rotated a moment ago is refused at once, even when
// the token itself is remembered.
type caller struct {
	principal *auth.Principal
	org       *storage.Organization
	user      *storage.User
}

// hasScope reports whether the token carries one of scopes and the
// organization allows it: an external identity provider cannot grant more
// than the operator allowed the organization.
func (c *caller) hasScope(scopes ...string) bool {
	for _, s := range scopes {
		if c.principal.HasScope(s) && c.org.Allows(s) {
			return true
		}
	}
	return false
}

func callerOf(c echo.Context) *caller {
	cl, _ := c.Get(ctxCaller).(*caller)
	return cl
}

// The 401 details. Unknown organization, wrong secret and "user not in this
// organization" share one answer, so that a caller cannot learn which
// organizations or users exist elsewhere.
var (
	errNoToken      = errUnauthorized("A bearer token is required.")
	errBadToken     = errUnauthorized("The bearer token is invalid or expired.")
	errNoOrgSecret  = errUnauthorized("The x-organization-secret header is required.")
	errBadOrgAccess = errUnauthorized("The organization credentials are invalid for this token.")
	errUserDisabled = errUnauthorized("The user of this token is disabled.")
	// errTokenBeforeDisable: disabling a user voids the tokens issued
	// before it (spec 3.2), also once the user is enabled again.
	errTokenBeforeDisable = errUnauthorized("The token was issued before its user was last disabled.")
)

// issuedBeforeDisable reports whether p's token may have been issued before
// u was last disabled (auth.Principal.IssuedBeforeDisable has the rule: exact
// for the built-in issuer's tokens, by "iat" with leeway, auth.leeway, for
// the others). This holds on every path: the user is read on every request,
// cached token or not, whichever issuer signed it.
func issuedBeforeDisable(p *auth.Principal, u *storage.User, leeway time.Duration) bool {
	return p.IssuedBeforeDisable(u.DisabledAt, leeway)
}

// partnerAuth authenticates a request under /v1/organizations/:organization_id
// (spec 5): a valid bearer token, the organization's secret, and a token
// user that belongs to the organization and is enabled.
func (a *App) partnerAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return a.partnerAuthWith(next, a.getMember)
}

// partnerAuthWith is partnerAuth with member in place of getMember.
func (a *App) partnerAuthWith(next echo.HandlerFunc, member func(c echo.Context, orgID, userID string) (*storage.Organization, *storage.User, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		token, ok := bearerToken(req)
		if !ok {
			return errNoToken
		}
		p, err := a.verifier.Verify(req.Context(), token)
		if err != nil {
			if errors.Is(err, auth.ErrInvalidToken) {
				return errBadToken.withCause(err)
			}
			return err
		}
		secret := req.Header.Get(headerOrganizationSecret)
		if secret == "" {
			return errNoOrgSecret
		}
		orgID := c.Param("organization_id")
		if p.OrgID != "" && p.OrgID != orgID {
			return errBadOrgAccess
		}
		org, user, err := member(c, orgID, p.UserID)
		if errors.Is(err, storage.ErrNotFound) {
			return errBadOrgAccess
		}
		if err != nil {
			return err
		}
		if !storage.SecretMatches(org.SecretHash, secret) {
			return errBadOrgAccess
		}
		auditPartner(c, org.PartnerID, org.ID, user.ID)
		if user.Disabled {
			return errUserDisabled
		}
		if issuedBeforeDisable(p, user, a.cfg.Auth.Leeway) {
			return errTokenBeforeDisable
		}
		c.Set(ctxCaller, &caller{principal: p, org: org, user: user})
		return next(c)
	}
}

// requireScope refuses callers without one of scopes; denyStatus is 403, or
// 401 on custom drug operations (spec 5.4). The detail names the first
// scope.
func requireScope(denyStatus int, scopes ...string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !callerOf(c).hasScope(scopes...) {
				return errScope(denyStatus, scopes[0])
			}
			return next(c)
		}
	}
}

// requireUserAccess guards paths naming a user: a token acts on its own
// user's paths; another user's needs an owner or admin token. denyStatus is
// 403, or 401 on custom drug operations, whose error list has no 403.
func requireUserAccess(denyStatus int) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			cl := callerOf(c)
			if c.Param("user_id") == cl.user.ID || cl.user.Role.Manages() {
				return next(c)
			}
			if denyStatus == http.StatusUnauthorized {
				return errUnauthorized("This token may not act for another user.")
			}
			return errForbidden("This token may not act for another user.")
		}
	}
}

// requireManager refuses callers who are not an owner or admin of the
// organization (bulk custom drug creation, spec 4.4 and 5.5: 401).
func requireManager(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !callerOf(c).user.Role.Manages() {
			return errUnauthorized("Only an owner or admin of the organization may do this.")
		}
		return next(c)
	}
}
