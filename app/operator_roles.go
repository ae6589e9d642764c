package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/invopop/validation/is"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// Operator identities and the roles matrix (issue 27, M1). Every request
// of the operator listener that needs a credential, the console's pages
// and forms included, names one permission (routes.go); the role of the
// key that made it must hold it (roleMatrix), and a partner's key reaches
// only that partner's resources (authorize). Both the operator API's
// middleware (operatorAuth) and the console's (consolePage) call
// authorize: there is no other check to keep in step.

// The operator roles. A partner key's role is rolePartnerPrefix followed
// by the partner's id.
const (
	roleAdmin         = "admin"
	roleOperator      = "operator"
	roleViewer        = "viewer"
	rolePartner       = "partner"
	rolePartnerPrefix = rolePartner + ":"
)

// configKeyName is the identity of admin.api_key, which is an admin key.
const configKeyName = "admin (config)"

// permission is what one route of the operator listener needs.
type permission string

// The permissions, one per kind of route.
const (
	// permSignedIn: any valid key (the console's not-found page).
	permSignedIn permission = "signed-in"
	// permOverview: the instance-wide counts (overview, console home).
	permOverview permission = "overview"
	// permMetrics: the Prometheus metrics of the whole instance.
	permMetrics permission = "metrics"
	// permPartnersRead: list partners (a partner key: its own).
	permPartnersRead permission = "partners:read"
	// permPartnersWrite: create partners and rotate their secrets, which
	// let their holder mint tokens at the built-in issuer.
	permPartnersWrite permission = "partners:write"
	// permOrganizationsRead: list and read organizations.
	permOrganizationsRead permission = "organizations:read"
	// permOrganizationsWrite: create organizations and rotate their
	// secrets, which the partner API requires with every token.
	permOrganizationsWrite permission = "organizations:write"
	// permUsersRead: read an organization's users (prescribers, not
	// patients).
	permUsersRead permission = "users:read"
	// permUsersWrite: create users.
	permUsersWrite permission = "users:write"
	// permPatients: read and write patients and their prescriptions.
	permPatients permission = "patients"
	// permTokens: mint partner tokens for any user, which read patients.
	permTokens permission = "tokens"
	// permBackup: download a backup, which holds every patient.
	permBackup permission = "backup"
	// permEndpointsRead: list and read webhook endpoints.
	permEndpointsRead permission = "endpoints:read"
	// permEndpointsWrite: register and delete webhook endpoints.
	permEndpointsWrite permission = "endpoints:write"
	// permEndpointsRotate: rotate a webhook endpoint's signing secret.
	permEndpointsRotate permission = "endpoints:rotate"
	// permEndpointsDiagnose: check a signature and body a receiver saw
	// against the endpoint's secrets and the event's payload; the secrets
	// are used, never shown, but an answer tells whether a signature is
	// right, so it is held as rotation is.
	permEndpointsDiagnose permission = "endpoints:diagnose"
	// permEndpointsTest: send a signed webhook.test event to an endpoint
	// (a partner key: its own endpoints).
	permEndpointsTest permission = "endpoints:test"
	// permEndpointsRecover: enable a disabled webhook endpoint and replay
	// its failed events (a partner key: its own endpoints), as replay.
	permEndpointsRecover permission = "endpoints:recover"
	// permEventsRead: list and read events and their deliveries.
	permEventsRead permission = "events:read"
	// permEventsReplay: replay an event.
	permEventsReplay permission = "events:replay"
	// permOperatorKeys: create, list and revoke operator keys.
	permOperatorKeys permission = "operator-keys"
	// permSandboxClock: move the sandbox's clock forward (rxgate sandbox
	// only; serve answers 409).
	permSandboxClock permission = "sandbox:clock"
	// permAudit: read the audit trail, which names every patient read
	// and who read it.
	permAudit permission = "audit"
)

// roleMatrix is the roles matrix: for each permission, the roles that hold
// it (rolePartner standing for every partner:<id> role, limited to its
// partner's resources by authorize). admin holds every permission. A
// route's permission missing here is held by admin alone.
var roleMatrix = map[permission][]string{
	permSignedIn:           {roleOperator, roleViewer, rolePartner},
	permOverview:           {roleOperator, roleViewer},
	permMetrics:            {roleOperator, roleViewer},
	permPartnersRead:       {roleOperator, roleViewer, rolePartner},
	permPartnersWrite:      {},
	permOrganizationsRead:  {roleOperator, roleViewer, rolePartner},
	permOrganizationsWrite: {},
	permUsersRead:          {roleOperator, rolePartner},
	permUsersWrite:         {},
	permPatients:           {},
	permTokens:             {},
	permBackup:             {},
	permEndpointsRead:      {roleOperator, roleViewer, rolePartner},
	permEndpointsWrite:     {roleOperator},
	permEndpointsRotate:    {roleOperator, rolePartner},
	permEndpointsDiagnose:  {roleOperator, rolePartner},
	permEndpointsTest:      {roleOperator, rolePartner},
	permEndpointsRecover:   {roleOperator, rolePartner},
	permEventsRead:         {roleOperator, roleViewer, rolePartner},
	permEventsReplay:       {roleOperator, rolePartner},
	permOperatorKeys:       {},
	permAudit:              {},
	permSandboxClock:       {roleOperator},
}

// operatorIdentity is who made a request of the operator listener: the key
// (its id, "" for admin.api_key), its name and role.
type operatorIdentity struct {
	KeyID string
	Name  string
	Role  string
	// PartnerID is the partner a partner key is limited to; "" for the
	// other roles.
	PartnerID string
}

// configIdentity is admin.api_key's identity.
var configIdentity = &operatorIdentity{Name: configKeyName, Role: roleAdmin}

// identityOf returns the identity of a stored key.
func identityOf(k *storage.OperatorKey) *operatorIdentity {
	id := &operatorIdentity{KeyID: k.ID, Name: k.Name, Role: k.Role}
	if p, ok := strings.CutPrefix(k.Role, rolePartnerPrefix); ok {
		id.PartnerID = p
	}
	return id
}

// baseRole is the role's row in roleMatrix: rolePartner for every
// partner:<id>.
func (id *operatorIdentity) baseRole() string {
	if id.PartnerID != "" {
		return rolePartner
	}
	return id.Role
}

// can reports whether the identity's role holds p.
func (id *operatorIdentity) can(p permission) bool {
	if id == nil {
		return false
	}
	role := id.baseRole()
	if role == roleAdmin {
		return true
	}
	for _, r := range roleMatrix[p] {
		if r == role {
			return true
		}
	}
	return false
}

// permissions is every permission the identity holds, by name, for the
// console's templates.
func (id *operatorIdentity) permissions() map[string]bool {
	out := map[string]bool{}
	for p := range roleMatrix {
		if id.can(p) {
			out[string(p)] = true
		}
	}
	return out
}

// parseRole checks a role as an operator key is created with: admin,
// operator, viewer or partner:<partner id>. It returns the partner id of
// a partner role.
func parseRole(role string) (partnerID string, err error) {
	switch role {
	case roleAdmin, roleOperator, roleViewer:
		return "", nil
	}
	if p, ok := strings.CutPrefix(role, rolePartnerPrefix); ok && is.UUID.Validate(p) == nil && p != "" {
		return p, nil
	}
	return "", errors.New("must be admin, operator, viewer or partner:<partner id>")
}

// operatorKeyPrefix starts every operator key's secret. The key's id
// follows, then "_" and the secret itself: the id finds the stored hash,
// which is compared in constant time. Ids are uuids, which hold no "_".
const operatorKeyPrefix = "rxk_"

// operatorKeyToken is what a key's holder sends: its id and secret.
func operatorKeyToken(id, secret string) string { return operatorKeyPrefix + id + "_" + secret }

// parseOperatorKeyToken splits a token made by operatorKeyToken.
func parseOperatorKeyToken(token string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(token, operatorKeyPrefix)
	if !ok {
		return "", "", false
	}
	id, secret, ok = strings.Cut(rest, "_")
	return id, secret, ok && storage.ValidID(id) && secret != ""
}

// identify returns the identity of an operator credential, or nil when it
// is none: admin.api_key (compared in constant time) or a stored key that
// is not revoked, read from the store on every call so that a revocation
// holds at once on every replica. An error is the store's.
func (a *App) identify(ctx context.Context, token string) (*operatorIdentity, error) {
	if token == "" {
		return nil, nil
	}
	if a.cfg.Admin.APIKey != "" && storage.SecretMatches(a.adminKeyHash, token) {
		return configIdentity, nil
	}
	id, secret, ok := parseOperatorKeyToken(token)
	if !ok {
		return nil, nil
	}
	k, err := a.store.GetOperatorKey(ctx, id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if k.Revoked() || !storage.SecretMatches(k.SecretHash, secret) {
		return nil, nil
	}
	return identityOf(k), nil
}

// slugInsufficientRole is the error slug of a role refused a route.
const slugInsufficientRole = "insufficient-role"

// errRole is the 403 of a role that does not hold a route's permission.
func errRole(id *operatorIdentity) *Error {
	return &Error{Status: http.StatusForbidden, Code: codeForbidden, Slug: slugInsufficientRole, Title: "Insufficient permissions",
		Detail: fmt.Sprintf("The operator key %q (role %s) may not do this.", id.Name, id.baseRole())}
}

// ownedParams are the path parameters that name a partner's resource,
// with how to find the partner that owns it.
var ownedParams = []struct {
	name  string
	owner func(ctx context.Context, s storage.Store, id string) (string, error)
}{
	{"partner_id", func(_ context.Context, _ storage.Store, id string) (string, error) { return id, nil }},
	{"organization_id", func(ctx context.Context, s storage.Store, id string) (string, error) {
		o, err := s.GetOrganization(ctx, id)
		if err != nil {
			return "", err
		}
		return o.PartnerID, nil
	}},
	{"endpoint_id", func(ctx context.Context, s storage.Store, id string) (string, error) {
		e, err := s.GetWebhookEndpoint(ctx, id)
		if err != nil {
			return "", err
		}
		return e.PartnerID, nil
	}},
	{"event_id", func(ctx context.Context, s storage.Store, id string) (string, error) {
		e, err := s.GetEvent(ctx, id)
		if err != nil {
			return "", err
		}
		return e.PartnerID, nil
	}},
}

// authorize refuses id a route that needs p: 403 when its role does not
// hold p, and, for a partner key, 404 when a path parameter names another
// partner's resource, the answer the route gives a resource that does
// not exist, so that the key cannot learn that it does. A resource that
// does not exist is left to the route to answer.
func (a *App) authorize(c echo.Context, id *operatorIdentity, p permission) error {
	auditOperator(c, id)
	if !id.can(p) {
		return errRole(id)
	}
	if id.PartnerID == "" {
		return nil
	}
	ctx := c.Request().Context()
	for _, op := range ownedParams {
		v := c.Param(op.name)
		if v == "" {
			continue
		}
		owner, err := op.owner(ctx, a.store, v)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if owner != id.PartnerID {
			return fmt.Errorf("%s of another partner: %w", op.name, storage.ErrNotFound)
		}
	}
	return nil
}

// ctxIdentity keys the request context's operator identity.
type ctxIdentity struct{}

// withIdentity returns ctx carrying id.
func withIdentity(ctx context.Context, id *operatorIdentity) context.Context {
	return context.WithValue(ctx, ctxIdentity{}, id)
}

// identityFrom returns the identity ctx carries, or nil.
func identityFrom(ctx context.Context) *operatorIdentity {
	id, _ := ctx.Value(ctxIdentity{}).(*operatorIdentity)
	return id
}

// partnerScope is the partner a request's lists are limited to: a
// partner key's partner, "" for every other role.
func partnerScope(ctx context.Context) string {
	if id := identityFrom(ctx); id != nil {
		return id.PartnerID
	}
	return ""
}

// operatorAuth authenticates an operator API request by its Bearer key
// (identify), within the key failure limit (checkOperatorKey), and
// authorizes it for p (authorize). A request without a Bearer key
// guesses nothing and is not counted.
func (a *App) operatorAuth(p permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			wrong := errUnauthorized("A valid operator API key is required.")
			token, ok := bearerToken(c.Request())
			if !ok {
				return wrong
			}
			ctx := c.Request().Context()
			id, err := a.identify(ctx, token)
			if err != nil {
				return err
			}
			if err := a.checkOperatorKey(c, id != nil, wrong); err != nil {
				return err
			}
			if err := a.authorize(c, id, p); err != nil {
				return err
			}
			c.SetRequest(c.Request().WithContext(withIdentity(ctx, id)))
			return next(c)
		}
	}
}
