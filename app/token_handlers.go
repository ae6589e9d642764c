package app

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/storage"
)

// tokenRequest is the body of POST /v1/token, as the hosted service takes
// it. scope may be an array or a space-separated string; absent, it asks
// for every scope the organization allows.
type tokenRequest struct {
	GrantType string          `json:"grantType"`
	Scope     json.RawMessage `json:"scope"`
}

// tokenResponse is the data of a /v1/token answer.
type tokenResponse struct {
	AccessToken string   `json:"accessToken"`
	TokenType   string   `json:"tokenType"`
	ExpiresIn   int64    `json:"expiresIn"`
	Scope       []string `json:"scope"`
}

var errBadClient = errUnauthorized("The partner, organization or user credentials are invalid.")

// issueToken implements the hosted service's token endpoint with the
// built-in issuer. Credentials are checked before the body, so that an
// unauthenticated caller learns nothing from validation messages; every
// credential failure gets the same answer.
func (a *App) issueToken(c echo.Context) error {
	h := c.Request().Header
	partnerID, partnerSecret := h.Get("X-Partner-Id"), h.Get("X-Partner-Secret")
	orgID, orgSecret, userID := h.Get("X-Organization-Id"), h.Get("X-Organization-Secret"), h.Get("X-User-Id")
	if partnerID == "" || partnerSecret == "" || orgID == "" || orgSecret == "" || userID == "" {
		return errUnauthorized("The x-partner-id, x-partner-secret, x-organization-id, x-organization-secret and x-user-id headers are required.")
	}
	ctx := c.Request().Context()
	partner, err := a.store.GetPartner(ctx, partnerID)
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	org, user, merr := a.store.GetMember(ctx, orgID, userID)
	if merr != nil && !errors.Is(merr, storage.ErrNotFound) {
		return merr
	}
	// Evaluate every check, so the time taken does not say which failed.
	okPartner := err == nil && storage.SecretMatches(partner.SecretHash, partnerSecret)
	okOrg := merr == nil && storage.SecretMatches(org.SecretHash, orgSecret) && okPartner && org.PartnerID == partner.ID
	if !okPartner || !okOrg {
		return errBadClient
	}
	if user.Disabled {
		return errUserDisabled
	}

	body, err := readBody(c)
	if err != nil {
		return err
	}
	if body == nil {
		return errBadRequest("The request body is required.")
	}
	var req tokenRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return errMalformedJSON.withCause(err)
	}
	if req.GrantType != "client_credentials" {
		return errValidation(http.StatusBadRequest, []FieldError{{Field: "grantType", Message: "must be client_credentials", Code: codeValidation}})
	}
	requested, ok := parseScope(req.Scope)
	if !ok {
		return errValidation(http.StatusBadRequest, []FieldError{{Field: "scope", Message: "must be an array of strings or a space-separated string", Code: codeValidation}})
	}
	scopes := grantable(org, requested)
	ttl := a.cfg.Auth.TokenTTL
	token, _, err := a.issuer.Mint(auth.MintRequest{UserID: user.ID, OrgID: org.ID, Scopes: scopes, TTL: ttl, DisabledAt: user.DisabledAt})
	if err != nil {
		return err
	}
	return a.ok(c, "Token issued", tokenResponse{AccessToken: token, TokenType: "Bearer", ExpiresIn: int64(ttl / time.Second), Scope: scopes})
}

// parseScope reads scope as an array of strings or a space-separated
// string; absent or null is nil (every allowed scope).
func parseScope(raw json.RawMessage) ([]string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		if list == nil {
			list = []string{}
		}
		return list, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return strings.Fields(s), true
	}
	return nil, false
}

// jwks serves the built-in issuer's public keys.
func (a *App) jwks(c echo.Context) error {
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, a.issuer.JWKS())
}

// OrganizationValidation is the data of the validate operation.
type OrganizationValidation struct {
	OrganizationID string    `json:"organization_id"`
	Validated      bool      `json:"validated"`
	ValidatedAt    time.Time `json:"validated_at"`
}

// validateOrganization marks the caller's organization validated (spec
// 4.10, 6.1). Repeating it keeps the first validated_at.
func (a *App) validateOrganization(c echo.Context) error {
	o, err := a.store.ValidateOrganization(c.Request().Context(), callerOf(c).org.ID)
	if err != nil {
		return err
	}
	return a.ok(c, "Organization validated", OrganizationValidation{OrganizationID: o.ID, Validated: true, ValidatedAt: *o.ValidatedAt})
}
