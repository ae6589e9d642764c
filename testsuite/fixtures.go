package testsuite

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Roles a user can hold (issue 2, operator API).
const (
	RoleOwner      = "owner"
	RoleAdmin      = "admin"
	RolePrescriber = "prescriber"
	RoleMember     = "member"
)

// Roles lists every role, most privileged first.
var Roles = []string{RoleOwner, RoleAdmin, RolePrescriber, RoleMember}

// HeaderOrganizationSecret carries the organization secret (spec 5.2).
const HeaderOrganizationSecret = "x-organization-secret"

// Unique returns prefix followed by a random hex suffix, for names and
// e-mails that must not collide between tests sharing a server.
func Unique(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Tenant is a partner with one organization, one user per role and one
// patient of the prescriber, all created through the operator API.
type Tenant struct {
	env *Env

	PartnerID, PartnerSecret  string
	OrgID, OrgSecret, OrgName string
	// AllowedScopes is the organization's allowed_scopes as answered.
	AllowedScopes []string
	// Users maps each role to its user's id; Emails to its e-mail.
	Users, Emails map[string]string
	// PatientID is a patient of the prescriber.
	PatientID string
}

// TenantOption adjusts NewTenant.
type TenantOption func(*tenantOptions)

type tenantOptions struct {
	scopes                   []string
	partnerID, partnerSecret string
}

// WithAllowedScopes sets the organization's allowed_scopes.
func WithAllowedScopes(scopes ...string) TenantOption {
	return func(o *tenantOptions) { o.scopes = append([]string{}, scopes...) }
}

// WithPartner puts the organization under an existing partner instead of a
// new one.
func WithPartner(id, secret string) TenantOption {
	return func(o *tenantOptions) { o.partnerID, o.partnerSecret = id, secret }
}

// NewPartner creates a partner and returns its id and secret.
func (e *Env) NewPartner(t testing.TB) (id, secret string) {
	t.Helper()
	r := e.MustAdmin(t, http.MethodPost, "/admin/v1/partners", map[string]any{"name": Unique("partner-")}, http.StatusCreated)
	return r.String(t, "data.partner_id"), r.String(t, "data.partner_secret")
}

// NewTenant creates a tenant through the operator API.
func (e *Env) NewTenant(t testing.TB, opts ...TenantOption) *Tenant {
	t.Helper()
	var o tenantOptions
	for _, opt := range opts {
		opt(&o)
	}
	tn := &Tenant{env: e, Users: map[string]string{}, Emails: map[string]string{}}
	tn.PartnerID, tn.PartnerSecret = o.partnerID, o.partnerSecret
	if tn.PartnerID == "" {
		tn.PartnerID, tn.PartnerSecret = e.NewPartner(t)
	}

	tn.OrgName = Unique("org-")
	org := map[string]any{"name": tn.OrgName, "partner_id": tn.PartnerID}
	if o.scopes != nil {
		org["allowed_scopes"] = o.scopes
	}
	r := e.MustAdmin(t, http.MethodPost, "/admin/v1/organizations", org, http.StatusCreated)
	tn.OrgID = r.String(t, "data.organization_id")
	tn.OrgSecret = r.String(t, "data.organization_secret")
	tn.AllowedScopes = r.Strings(t, "data.allowed_scopes")

	for _, role := range Roles {
		email := Unique(role+"-") + "@example.test"
		r := e.MustAdmin(t, http.MethodPost, "/admin/v1/organizations/"+tn.OrgID+"/users", map[string]any{
			"email": email, "given_name": "Alex", "family_name": "Nguyen", "title": "Dr", "role": role,
		}, http.StatusCreated)
		tn.Users[role] = r.String(t, "data.user_id")
		tn.Emails[role] = email
	}

	r = e.MustAdmin(t, http.MethodPost, tn.UserPath(RolePrescriber)+"/patients", map[string]any{
		"given_name": "Charlotte", "family_name": "Wilson", "date_of_birth": "1984-07-19", "sex": "F",
		"phone": "0412345678", "email": "charlotte.wilson@example.test", "medicare_card_number": "2123456701",
		"medicare_irn": "1", "partner_patient_id": Unique("pp-"),
	}, http.StatusCreated)
	tn.PatientID = r.String(t, "data.patient_id")
	return tn
}

// UserID returns the id of user, which is a role (RolePrescriber) or
// already a user id.
func (tn *Tenant) UserID(user string) string {
	if id, ok := tn.Users[user]; ok {
		return id
	}
	return user
}

// OrgPath is the operator API path of the organization.
func (tn *Tenant) OrgPath() string { return "/admin/v1/organizations/" + tn.OrgID }

// UserPath is the operator API path of user (a role or an id).
func (tn *Tenant) UserPath(user string) string {
	return tn.OrgPath() + "/users/" + tn.UserID(user)
}

// PatientPath is the operator API path of the prescriber's patient.
func (tn *Tenant) PatientPath() string {
	return tn.UserPath(RolePrescriber) + "/patients/" + tn.PatientID
}

// ValidatePath is the partner path of the organization's validate
// operation (spec 4.10), relative to BaseURL.
func (tn *Tenant) ValidatePath() string {
	return "/v1/organizations/" + tn.OrgID + "/validate"
}

// Headers are the partner request headers besides the token: the
// organization secret.
func (tn *Tenant) Headers() map[string]string {
	return map[string]string{HeaderOrganizationSecret: tn.OrgSecret}
}

// TokenHeaders are the credential headers of POST /v1/token for user (a
// role or an id).
func (tn *Tenant) TokenHeaders(user string) map[string]string {
	return map[string]string{
		"x-partner-id":          tn.PartnerID,
		"x-partner-secret":      tn.PartnerSecret,
		"x-organization-id":     tn.OrgID,
		"x-organization-secret": tn.OrgSecret,
		"x-user-id":             tn.UserID(user),
	}
}

// Token mints a token for user (a role or an id) through POST
// /admin/v1/tokens. With no scopes it asks for every scope the organization
// allows. It needs the built-in issuer.
func (tn *Tenant) Token(t testing.TB, user string, scopes ...string) string {
	t.Helper()
	body := map[string]any{"organization_id": tn.OrgID, "user_id": tn.UserID(user)}
	if len(scopes) > 0 {
		body["scopes"] = scopes
	}
	r := tn.env.MustAdmin(t, http.MethodPost, "/admin/v1/tokens", body, http.StatusCreated)
	return r.String(t, "data.access_token")
}

// RotateOrgSecret rotates the organization secret, records the new one in
// tn and returns the old one.
func (tn *Tenant) RotateOrgSecret(t testing.TB) (old string) {
	t.Helper()
	r := tn.env.MustAdmin(t, http.MethodPost, tn.OrgPath()+"/rotate-secret", nil, http.StatusOK)
	old, tn.OrgSecret = tn.OrgSecret, r.String(t, "data.organization_secret")
	require.NotEqual(t, old, tn.OrgSecret, "rotation returned the old organization secret")
	return old
}

// RotatePartnerSecret rotates the partner secret, records the new one in tn
// and returns the old one.
func (tn *Tenant) RotatePartnerSecret(t testing.TB) (old string) {
	t.Helper()
	r := tn.env.MustAdmin(t, http.MethodPost, "/admin/v1/partners/"+tn.PartnerID+"/rotate-secret", nil, http.StatusOK)
	old, tn.PartnerSecret = tn.PartnerSecret, r.String(t, "data.partner_secret")
	require.NotEqual(t, old, tn.PartnerSecret, "rotation returned the old partner secret")
	return old
}
