package app

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/invopop/validation"
	"github.com/invopop/validation/is"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/storage"
)

// --- partners ---

// PartnerCreateRequest is the body of POST /admin/v1/partners.
type PartnerCreateRequest struct {
	PartnerID string `json:"partner_id"`
	Name      string `json:"name"`
}

// Validate checks the request.
func (r *PartnerCreateRequest) Validate() error {
	return validation.ValidateStruct(r,
		validation.Field(&r.PartnerID, optionalUUID),
		validation.Field(&r.Name, notBlank, validation.RuneLength(1, 200)),
	)
}

// PartnerView is a partner as the operator API shows it. The secret is set
// only on create and rotation.
type PartnerView struct {
	PartnerID     string    `json:"partner_id"`
	Name          string    `json:"name"`
	PartnerSecret string    `json:"partner_secret,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
}

func partnerView(p *storage.Partner, secret string) PartnerView {
	return PartnerView{PartnerID: p.ID, Name: p.Name, PartnerSecret: secret, CreatedAt: p.CreatedAt}
}

func (a *App) createPartner(c echo.Context) error {
	var req PartnerCreateRequest
	if err := bindAdmin(c, &req); err != nil {
		return err
	}
	secret := storage.NewSecret()
	p := &storage.Partner{ID: req.PartnerID, Name: req.Name, SecretHash: storage.HashSecret(secret)}
	if err := a.store.CreatePartner(c.Request().Context(), p); err != nil {
		return err
	}
	return a.created(c, "Partner created", partnerView(p, secret))
}

func (a *App) listPartners(c echo.Context) error {
	out, err := a.findPartners(c.Request().Context())
	if err != nil {
		return err
	}
	return a.ok(c, "Partners retrieved", out)
}

func (a *App) findPartners(ctx context.Context) ([]PartnerView, error) {
	ps, err := a.store.ListPartners(ctx)
	if err != nil {
		return nil, err
	}
	scope := partnerScope(ctx) // a partner key sees its own partner only
	out := make([]PartnerView, 0, len(ps))
	for i := range ps {
		if scope == "" || ps[i].ID == scope {
			out = append(out, partnerView(&ps[i], ""))
		}
	}
	return out, nil
}

func (a *App) rotatePartnerSecret(c echo.Context) error {
	if err := pathUUID(c, "partner_id"); err != nil {
		return err
	}
	secret := storage.NewSecret()
	p, err := a.store.SetPartnerSecret(c.Request().Context(), c.Param("partner_id"), storage.HashSecret(secret))
	if err != nil {
		return err
	}
	return a.ok(c, "Partner secret rotated", partnerView(p, secret))
}

// --- organizations ---

// OrganizationCreateRequest is the body of POST /admin/v1/organizations.
type OrganizationCreateRequest struct {
	OrganizationID string   `json:"organization_id"`
	Name           string   `json:"name"`
	PartnerID      string   `json:"partner_id"`
	AllowedScopes  []string `json:"allowed_scopes"`
}

// Validate checks the request.
func (r *OrganizationCreateRequest) Validate() error {
	return validation.ValidateStruct(r,
		validation.Field(&r.OrganizationID, optionalUUID),
		validation.Field(&r.Name, notBlank, validation.RuneLength(1, 200)),
		validation.Field(&r.PartnerID, validation.Required, is.UUID.Error("must be a valid uuid")),
		validation.Field(&r.AllowedScopes, validation.Each(validation.In(anys(auth.PartnerScopes)...).Error("must be a partner scope"))),
	)
}

// OrganizationView is an organization as the operator API shows it.
type OrganizationView struct {
	OrganizationID     string     `json:"organization_id"`
	Name               string     `json:"name"`
	PartnerID          string     `json:"partner_id"`
	AllowedScopes      []string   `json:"allowed_scopes"`
	OrganizationSecret string     `json:"organization_secret,omitempty"`
	Validated          bool       `json:"validated"`
	ValidatedAt        *time.Time `json:"validated_at"`
	CreatedAt          time.Time  `json:"created_at"`
}

func organizationView(o *storage.Organization, secret string) OrganizationView {
	return OrganizationView{
		OrganizationID: o.ID, Name: o.Name, PartnerID: o.PartnerID, AllowedScopes: o.AllowedScopes,
		OrganizationSecret: secret, Validated: o.Validated(), ValidatedAt: o.ValidatedAt, CreatedAt: o.CreatedAt,
	}
}

func (a *App) createOrganization(c echo.Context) error {
	var req OrganizationCreateRequest
	if err := bindAdmin(c, &req); err != nil {
		return err
	}
	scopes := req.AllowedScopes
	if scopes == nil {
		scopes = auth.PartnerScopes
	}
	secret := storage.NewSecret()
	o := &storage.Organization{
		ID: req.OrganizationID, Name: req.Name, PartnerID: req.PartnerID,
		AllowedScopes: uniqueStrings(scopes), SecretHash: storage.HashSecret(secret),
	}
	err := a.store.CreateOrganization(c.Request().Context(), o)
	if errors.Is(err, storage.ErrNotFound) {
		return errValidation(http.StatusUnprocessableEntity, []FieldError{{Field: "partner_id", Message: "must name an existing partner", Code: codeValidation}})
	}
	if err != nil {
		return err
	}
	return a.created(c, "Organization created", organizationView(o, secret))
}

func (a *App) listOrganizations(c echo.Context) error {
	out, err := a.findOrganizations(c.Request().Context())
	if err != nil {
		return err
	}
	return a.ok(c, "Organizations retrieved", out)
}

func (a *App) findOrganizations(ctx context.Context) ([]OrganizationView, error) {
	os, err := a.store.ListOrganizations(ctx)
	if err != nil {
		return nil, err
	}
	scope := partnerScope(ctx) // a partner key sees its own organizations only
	out := make([]OrganizationView, 0, len(os))
	for i := range os {
		if scope == "" || os[i].PartnerID == scope {
			out = append(out, organizationView(&os[i], ""))
		}
	}
	return out, nil
}

func (a *App) getOrganization(c echo.Context) error {
	o, err := a.findOrganization(c.Request().Context(), c.Param("organization_id"))
	if err != nil {
		return err
	}
	return a.ok(c, "Organization retrieved", o)
}

// findOrganization reads the organization; an id that is not a uuid is
// 404.
func (a *App) findOrganization(ctx context.Context, id string) (OrganizationView, error) {
	if err := checkID(id); err != nil {
		return OrganizationView{}, err
	}
	o, err := a.store.GetOrganization(ctx, id)
	if err != nil {
		return OrganizationView{}, err
	}
	return organizationView(o, ""), nil
}

// listOrganizationUsers is GET /admin/v1/organizations/{id}/users: the
// organization's users in creation order, paged as the partner's user
// list is, each in full. An unknown organization is 404, before the
// query is looked at.
func (a *App) listOrganizationUsers(c echo.Context) error {
	ctx := c.Request().Context()
	org, err := a.findOrganization(ctx, c.Param("organization_id"))
	if err != nil {
		return err
	}
	page, err := pageRequest(c, userPageDefault, userPageMax)
	if err != nil {
		return err
	}
	users, info, err := a.findOrganizationUsers(ctx, org.OrganizationID, page)
	if err != nil {
		return err
	}
	return a.page(c, "Users retrieved", users, info)
}

// findOrganizationUsers reads one page of the organization's users. The
// caller finds the organization first (findOrganization), for its 404:
// the list alone does not say whether the organization exists.
func (a *App) findOrganizationUsers(ctx context.Context, orgID string, page storage.PageRequest) ([]UserView, storage.PageInfo, error) {
	users, info, err := a.store.ListUsers(ctx, orgID, page)
	if err != nil {
		return nil, storage.PageInfo{}, err
	}
	out := make([]UserView, len(users))
	for i := range users {
		out[i] = userView(&users[i])
	}
	return out, info, nil
}

func (a *App) rotateOrganizationSecret(c echo.Context) error {
	if err := pathUUID(c, "organization_id"); err != nil {
		return err
	}
	secret := storage.NewSecret()
	o, err := a.store.SetOrganizationSecret(c.Request().Context(), c.Param("organization_id"), storage.HashSecret(secret))
	if err != nil {
		return err
	}
	return a.ok(c, "Organization secret rotated", organizationView(o, secret))
}

// --- users ---

// UserCreateRequest is the body of POST /admin/v1/organizations/{id}/users.
type UserCreateRequest struct {
	UserID     string `json:"user_id"`
	Email      string `json:"email"`
	GivenName  string `json:"given_name"`
	FamilyName string `json:"family_name"`
	Title      string `json:"title"`
	Role       string `json:"role"`
}

// Validate checks the request.
func (r *UserCreateRequest) Validate() error {
	roles := make([]any, len(storage.Roles))
	for i, role := range storage.Roles {
		roles[i] = string(role)
	}
	return validation.ValidateStruct(r,
		validation.Field(&r.UserID, optionalUUID),
		validation.Field(&r.Email, validation.Required, validation.RuneLength(3, maxFreeText), is.EmailFormat.Error("must be a valid email address")),
		validation.Field(&r.GivenName, notBlank, validation.RuneLength(1, maxFreeText)),
		validation.Field(&r.FamilyName, notBlank, validation.RuneLength(1, maxFreeText)),
		validation.Field(&r.Title, validation.RuneLength(0, 30)),
		validation.Field(&r.Role, validation.Required, validation.In(roles...).Error("must be one of owner, admin, prescriber, member")),
	)
}

// UserView is a user's detail (spec 4.10, read one user).
type UserView struct {
	UserID     string    `json:"user_id"`
	Email      string    `json:"email"`
	GivenName  string    `json:"given_name"`
	FamilyName string    `json:"family_name"`
	Title      string    `json:"title"`
	Role       string    `json:"role"`
	Status     string    `json:"status"`
	CreatedAt  time.Time `json:"created_at"`
}

func userView(u *storage.User) UserView {
	status := "enabled"
	if u.Disabled {
		status = "disabled"
	}
	return UserView{
		UserID: u.ID, Email: u.Email, GivenName: u.GivenName, FamilyName: u.FamilyName,
		Title: u.Title, Role: string(u.Role), Status: status, CreatedAt: u.CreatedAt,
	}
}

func (a *App) createUser(c echo.Context) error {
	if err := pathUUID(c, "organization_id"); err != nil {
		return err
	}
	var req UserCreateRequest
	if err := bindAdmin(c, &req); err != nil {
		return err
	}
	u := &storage.User{
		OrgID: c.Param("organization_id"), ID: req.UserID, Email: req.Email, GivenName: req.GivenName,
		FamilyName: req.FamilyName, Title: req.Title, Role: storage.Role(req.Role),
	}
	err := a.store.CreateUser(c.Request().Context(), u)
	if errors.Is(err, storage.ErrAlreadyExists) {
		return errConflict("A user with this user_id or email already exists in the organization.").withCause(err)
	}
	if err != nil {
		return err
	}
	return a.created(c, "User created", userView(u))
}

func (a *App) getUserAdmin(c echo.Context) error {
	if err := pathUUID(c, "organization_id", "user_id"); err != nil {
		return err
	}
	u, err := a.store.GetUser(c.Request().Context(), c.Param("organization_id"), c.Param("user_id"))
	if err != nil {
		return err
	}
	return a.ok(c, "User retrieved", userView(u))
}

// --- patients ---

// AdminPatientCreateRequest is the body of the operator's patient create:
// any member of spec 2.3 plus partner_patient_id and an optional id.
type AdminPatientCreateRequest struct {
	PatientID        string `json:"patient_id"`
	PartnerPatientID string `json:"partner_patient_id"`
	PatientInput
}

// PatientView is a stored patient: every member that is set.
type PatientView struct {
	PatientID        string `json:"patient_id"`
	PartnerPatientID string `json:"partner_patient_id,omitempty"`
	UserID           string `json:"user_id"`
	storage.PatientFields
	DemographicVerifications []storage.Verification `json:"demographic_verifications"`
	CreatedAt                time.Time              `json:"created_at"`
	UpdatedAt                time.Time              `json:"updated_at"`
}

func patientView(p *storage.Patient) PatientView {
	v := PatientView{
		PatientID: p.ID, PartnerPatientID: p.PartnerPatientID, UserID: p.UserID, PatientFields: p.PatientFields,
		DemographicVerifications: p.Verifications, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
	if v.DemographicVerifications == nil {
		v.DemographicVerifications = []storage.Verification{}
	}
	return v
}

// today is the latest date a date of birth may have: today in the earliest
// time zone (UTC+14), so that no Australian "today" is refused.
func (a *App) today() time.Time {
	t := a.now().UTC().Add(14 * time.Hour)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func (r *AdminPatientCreateRequest) checkIDs() []FieldError {
	return append(checkField("patient_id", r.PatientID, optionalUUID),
		checkField("partner_patient_id", r.PartnerPatientID, validation.RuneLength(0, 128))...)
}

func (a *App) createPatientAdmin(c echo.Context) error {
	if err := pathUUID(c, "organization_id", "user_id"); err != nil {
		return err
	}
	var req AdminPatientCreateRequest
	if err := a.bindPatient(c, &req, true); err != nil {
		return err
	}
	p := &storage.Patient{
		OrgID: c.Param("organization_id"), UserID: c.Param("user_id"), ID: req.PatientID, PartnerPatientID: req.PartnerPatientID,
	}
	req.patch(&p.PatientFields)
	err := a.store.CreatePatient(c.Request().Context(), p)
	if errors.Is(err, storage.ErrAlreadyExists) {
		return errConflict("A patient with this patient_id or partner_patient_id already exists in the organization.").withCause(err)
	}
	if err != nil {
		return err
	}
	return a.created(c, "Patient created", patientView(p))
}

func (a *App) getPatientAdmin(c echo.Context) error {
	if err := pathUUID(c, "organization_id", "user_id", "patient_id"); err != nil {
		return err
	}
	p, err := a.store.GetPatient(c.Request().Context(), c.Param("organization_id"), c.Param("user_id"), c.Param("patient_id"))
	if err != nil {
		return err
	}
	return a.ok(c, "Patient retrieved", patientView(p))
}

// --- tokens ---

// TokenCreateRequest is the body of POST /admin/v1/tokens.
type TokenCreateRequest struct {
	OrganizationID string   `json:"organization_id"`
	UserID         string   `json:"user_id"`
	Scopes         []string `json:"scopes"`
	TTLSeconds     int      `json:"ttl_seconds"`
}

// maxTokenTTL bounds operator-minted tokens.
const maxTokenTTL = 30 * 24 * time.Hour

// Validate checks the request.
func (r *TokenCreateRequest) Validate() error {
	return validation.ValidateStruct(r,
		validation.Field(&r.OrganizationID, validation.Required, is.UUID.Error("must be a valid uuid")),
		validation.Field(&r.UserID, validation.Required, is.UUID.Error("must be a valid uuid")),
		validation.Field(&r.Scopes, validation.Each(validation.In(anys(auth.PartnerScopes)...).Error("must be a partner scope"))),
		validation.Field(&r.TTLSeconds, validation.Min(0), validation.Max(int(maxTokenTTL/time.Second))),
	)
}

// TokenView is an operator-minted token.
type TokenView struct {
	AccessToken string    `json:"access_token"`
	TokenType   string    `json:"token_type"`
	ExpiresAt   time.Time `json:"expires_at"`
	Scopes      []string  `json:"scopes"`
}

func (a *App) createToken(c echo.Context) error {
	if a.issuer == nil {
		return errBadRequest("The built-in token issuer is off (auth.builtin_issuer).")
	}
	var req TokenCreateRequest
	if err := bindAdmin(c, &req); err != nil {
		return err
	}
	ttl := time.Duration(req.TTLSeconds) * time.Second
	if ttl == 0 {
		ttl = a.cfg.Auth.TokenTTL
	}
	org, user, err := a.store.GetMember(c.Request().Context(), req.OrganizationID, req.UserID)
	if errors.Is(err, storage.ErrNotFound) {
		return errNotFound(slugNotFound, "The organization or user does not exist.").withCause(err)
	}
	if err != nil {
		return err
	}
	if user.Disabled {
		return errValidation(http.StatusUnprocessableEntity, []FieldError{{Field: "user_id", Message: "the user is disabled", Code: codeValidation}})
	}
	scopes := grantable(org, req.Scopes)
	token, exp, err := a.issuer.Mint(auth.MintRequest{UserID: user.ID, OrgID: org.ID, Scopes: scopes, TTL: ttl, DisabledAt: user.DisabledAt})
	if err != nil {
		return err
	}
	return a.created(c, "Token issued", TokenView{AccessToken: token, TokenType: "Bearer", ExpiresAt: exp.UTC(), Scopes: scopes})
}

// grantable returns the requested scopes the organization allows, in the
// order asked, without duplicates; nil asks for every allowed scope.
func grantable(org *storage.Organization, requested []string) []string {
	if requested == nil {
		requested = org.AllowedScopes
	}
	out := []string{}
	for _, s := range uniqueStrings(requested) {
		if org.Allows(s) {
			out = append(out, s)
		}
	}
	return out
}
