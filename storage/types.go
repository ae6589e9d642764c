package storage

import (
	"slices"
	"time"
)

// Partner is an integration partner: it owns organizations and receives
// their webhooks.
type Partner struct {
	ID         string
	Name       string
	SecretHash []byte
	CreatedAt  time.Time
}

// Organization is a tenant. Every partner request is scoped to one.
type Organization struct {
	ID            string
	Name          string
	PartnerID     string
	AllowedScopes []string
	SecretHash    []byte
	ValidatedAt   *time.Time
	CreatedAt     time.Time
}

// Validated reports whether the validate operation has succeeded for o.
func (o *Organization) Validated() bool { return o.ValidatedAt != nil }

// Allows reports whether the organization allows the scope.
func (o *Organization) Allows(scope string) bool {
	return slices.Contains(o.AllowedScopes, scope)
}

// Role is a user's role in its organization.
type Role string

// Roles a user can hold.
const (
	RoleOwner      Role = "owner"
	RoleAdmin      Role = "admin"
	RolePrescriber Role = "prescriber"
	RoleMember     Role = "member"
)

// Roles lists every role, most privileged first.
var Roles = []Role{RoleOwner, RoleAdmin, RolePrescriber, RoleMember}

// Manages reports whether the role may act on other users' resources and on
// organization-level resources.
func (r Role) Manages() bool { return r == RoleOwner || r == RoleAdmin }

// User is a member of an organization.
type User struct {
	OrgID      string
	ID         string
	Email      string
	GivenName  string
	FamilyName string
	Title      string
	Role       Role
	Disabled   bool
	// DisabledAt is when the user was last disabled; zero when never.
	// Tokens issued before it stay void after an enable (spec 3.2). Each
	// disable records a later time than the one before (NextDisabledAt).
	DisabledAt time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// NextDisabledAt is the time a disable of a user last disabled at prev
// (zero when never) records, now being the store clock's Timestamp: now,
// or a microsecond after prev when the clock reads no later (a clock
// stepped back, a replica whose clock is behind the one of the last
// disable, a fake clock). So every disable of a user gets a time of its
// own, later than the one before: a built-in token carries the DisabledAt
// it was minted under as its disable stamp, and a token minted between two
// disables must not match the second.
func NextDisabledAt(prev, now time.Time) time.Time {
	if !now.After(prev) {
		return prev.Add(time.Microsecond)
	}
	return now
}

// Prescriber is the user as a prescription records its prescriber.
func (u *User) Prescriber() Prescriber {
	return Prescriber{Title: u.Title, GivenName: u.GivenName, FamilyName: u.FamilyName, UserID: u.ID}
}

// Address is an Australian street address (spec 2.3).
type Address struct {
	StreetNumber string `json:"street_number"`
	StreetName   string `json:"street_name"`
	Suburb       string `json:"suburb"`
	State        string `json:"state"`
	Postcode     string `json:"postcode"`
}

// PatientFields are the members of spec section 2.3. A nil member is not
// set. Their JSON names are the spec's and are also their on-disk names.
type PatientFields struct {
	FamilyName              *string  `json:"family_name,omitempty"`
	GivenName               *string  `json:"given_name,omitempty"`
	DateOfBirth             *string  `json:"date_of_birth,omitempty"`
	Sex                     *string  `json:"sex,omitempty"`
	Title                   *string  `json:"title,omitempty"`
	Phone                   *string  `json:"phone,omitempty"`
	Email                   *string  `json:"email,omitempty"`
	CTGEligible             *bool    `json:"ctg_eligible,omitempty"`
	IndigenousType          *string  `json:"indigenous_type,omitempty"`
	ConcessionPensionNumber *string  `json:"concession_pension_number,omitempty"`
	EntitlementNumber       *string  `json:"entitlement_number,omitempty"`
	IHINumber               *string  `json:"ihi_number,omitempty"`
	RACFID                  *string  `json:"racf_id,omitempty"`
	IsInpatient             *bool    `json:"is_inpatient,omitempty"`
	MedicareCardNumber      *string  `json:"medicare_card_number,omitempty"`
	MedicareIRN             *string  `json:"medicare_irn,omitempty"`
	MedicareValidTo         *string  `json:"medicare_valid_to,omitempty"`
	DVAFileNumber           *string  `json:"dva_file_number,omitempty"`
	DVACardColor            *string  `json:"dva_card_color,omitempty"`
	AustralianAddress       *Address `json:"australian_address,omitempty"`
}

// Verification is a demographic verification request, recorded when an
// update changes a patient's name, date of birth or sex (spec 4.1 rule 1).
type Verification struct {
	Status      string    `json:"status"`
	RequestedAt time.Time `json:"requested_at"`
	Fields      []string  `json:"fields"`
}

// Patient belongs to one user of one organization.
type Patient struct {
	OrgID            string
	UserID           string
	ID               string
	PartnerPatientID string
	PatientFields
	Verifications []Verification
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Prescription statuses (spec 3.1).
const (
	StatusActive = "Active"
	StatusCeased = "Ceased"
	StatusError  = "Error"
)

// Prescriber is the prescribing user as recorded on a prescription.
type Prescriber struct {
	Title      string `json:"title"`
	GivenName  string `json:"given_name"`
	FamilyName string `json:"family_name"`
	UserID     string `json:"user_id"`
}

// Pharmacy names the pharmacy a prescription was sent to.
type Pharmacy struct {
	PharmacyID string `json:"pharmacy_id"`
	Name       string `json:"name"`
}

// Delivery says how a prescription token reached its recipient.
type Delivery struct {
	Method        string    `json:"method"`
	RecipientType string    `json:"recipient_type"`
	Destination   string    `json:"destination"`
	Pharmacy      *Pharmacy `json:"pharmacy,omitempty"`
}

// PrescriptionError describes why a prescription has status Error.
type PrescriptionError struct {
	Description string `json:"description"`
}

// CustomDrugDetails holds custom_product_id when the item is a custom drug.
type CustomDrugDetails struct {
	CustomProductID string `json:"custom_product_id,omitempty"`
}

// createdDateLayout is how created_date is written: ISO 8601 in UTC with
// millisecond precision and a Z suffix (the spec notes that some hosted
// responses omit the zone; rxgate always states it).
const createdDateLayout = "2006-01-02T15:04:05.000Z"

// Prescription is one element of a patient's prescription list (spec 2.5).
// The JSON names are the spec's, in the spec's order, and the stored record
// is this shape, so a page can be served from stored bytes.
type Prescription struct {
	OrgID     string    `json:"-"`
	UserID    string    `json:"-"`
	PatientID string    `json:"-"`
	CreatedAt time.Time `json:"-"`
	// EventStatus is set by CreatePrescription: the status its
	// prescription.created event was written with (EventPending or
	// EventSkipped). It is not stored with the prescription.
	EventStatus string `json:"-"`

	PrescriptionType string `json:"prescription_type"`
	URL              string `json:"url"`
	SCID             string `json:"scid"`
	Status           string `json:"status"`
	CreatedDate      string `json:"created_date"`
	PrescriptionItem
	Prescriber Prescriber         `json:"prescriber"`
	Delivery   Delivery           `json:"delivery"`
	Error      *PrescriptionError `json:"error,omitempty"`
}

// PrescriptionItem is what the prescriber chooses of a prescription: the
// members of spec 2.5 from item_name to custom_drug_details, besides the
// delivery.
type PrescriptionItem struct {
	ItemName                     string            `json:"item_name"`
	Quantity                     string            `json:"quantity"`
	NumberOfRepeatsAuthorised    string            `json:"number_of_repeats_authorised"`
	RepeatIntervals              string            `json:"repeat_intervals"`
	PBSCode                      string            `json:"pbs_code"`
	ItemStrength                 string            `json:"item_strength"`
	ItemForm                     string            `json:"item_form"`
	RouteAdministration          string            `json:"route_administration"`
	PBSDVAAuthorityNumber        string            `json:"pbsdva_authority_number"`
	PhoneApprovalAuthorityNumber string            `json:"phone_approval_authority_number"`
	ScheduleNumber               string            `json:"schedule_number"`
	PrivatePrescription          bool              `json:"private_prescription"`
	EmergencySupply              bool              `json:"emergency_supply"`
	BrandSubstitutionNotAllowed  bool              `json:"brand_substitution_not_allowed"`
	ReasonForPrescribing         string            `json:"reason_for_prescribing"`
	PatientInstructions          string            `json:"patient_instructions"`
	DoctorNotes                  string            `json:"doctor_notes"`
	PharmacyName                 string            `json:"pharmacy_name"`
	Regulation24                 bool              `json:"regulation_24"`
	ControlledSubstanceReference string            `json:"controlled_substance_reference"`
	UnusualDoseFlag              bool              `json:"unusual_dose_flag"`
	UnusualQtyFlag               bool              `json:"unusual_qty_flag"`
	MySLConsent                  bool              `json:"my_sl_consent"`
	SendToPharmacy               string            `json:"send_to_pharmacy"`
	UnlistedItemRepatAuthority   bool              `json:"unlisted_item_repat_authority"`
	PrescriberScriptNumber       string            `json:"prescriber_script_number"`
	CustomDrugDetails            CustomDrugDetails `json:"custom_drug_details"`
}

// PrepareCreate sets what the store assigns to a new prescription: the scid
// (unless set), the creation time (unless set: seeding and imports
// back-date prescriptions) and created_date, status Active without an
// error, and type ELECTRONIC unless set. The prescriber is the patient's
// user, which the store reads in its transaction (User.Prescriber). An id
// that breaks the id rules, the scid's or a parent's, is ErrNotFound.
func (p *Prescription) PrepareCreate(now time.Time) error {
	if p.SCID == "" {
		p.SCID = NewSCID()
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = now
	}
	p.CreatedAt = Timestamp(p.CreatedAt)
	p.CreatedDate = p.CreatedAt.Format(createdDateLayout)
	p.Status = StatusActive
	p.Error = nil
	if p.PrescriptionType == "" {
		p.PrescriptionType = "ELECTRONIC"
	}
	if !ValidIDs(p.OrgID, p.UserID, p.PatientID, p.SCID) {
		return ErrNotFound
	}
	return nil
}

// CustomDrug is an organization-level (UserID empty) or user-level drug
// (spec 2.4). Optional members are empty when not set.
type CustomDrug struct {
	OrgID                 string `json:"-"`
	UserID                string `json:"-"`
	ID                    string `json:"custom_drug_id"`
	ItemGenericName       string `json:"item_generic_name"`
	ItemStrength          string `json:"item_strength"`
	ItemForm              string `json:"item_form"`
	RouteOfAdministration string `json:"route_of_administration"`
	Quantity              string `json:"quantity"`
	MaxRepeats            string `json:"max_repeats"`
	PoisonClass           string `json:"poison_class"`
	ItemTradeName         string `json:"item_trade_name,omitempty"`
	BrandName             string `json:"brand_name,omitempty"`
	CustomProductID       string `json:"custom_product_id,omitempty"`
	Description           string `json:"description,omitempty"`
	PatientInstructions   string `json:"patient_instructions,omitempty"`
	DoctorInstructions    string `json:"doctor_instructions,omitempty"`
}

// WebhookEndpoint is a URL that receives a partner's events (spec 6.1).
//
// Its secrets are stored as they are, unlike partner and organization
// secrets, which are stored hashed: a signature (spec 6.4) is an HMAC keyed
// with the secret itself, so the server must hold it to sign.
type WebhookEndpoint struct {
	ID        string
	PartnerID string
	URL       string
	// Secret keys the current signature.
	Secret string
	// PreviousSecret is the secret replaced by the last rotation. Until
	// PreviousUntil deliveries also carry a signature made with it.
	PreviousSecret string
	PreviousUntil  time.Time
	// SignatureScheme is how deliveries are signed: SchemeRxgate (the
	// spec's own, 6.4) or SchemeStandard (Standard Webhooks). "" reads as
	// SchemeRxgate: endpoints stored before the field existed.
	SignatureScheme string
	CreatedAt       time.Time
	RotatedAt       *time.Time
	// FailingSince is when the endpoint's current streak of failed
	// attempts began; nil when its last attempt succeeded or none was
	// made (storage/health.go).
	FailingSince *time.Time
	// DisabledAt is when the endpoint was disabled, nil while it is
	// enabled; DisabledReason says why. A disabled endpoint's jobs are
	// held, not claimed.
	DisabledAt     *time.Time
	DisabledReason string
}

// The signature schemes an endpoint may use.
const (
	// SchemeRxgate is the spec's scheme (6.4): X-Webhook-Signature:
	// t=..,v1=<hex>. The default.
	SchemeRxgate = "rxgate"
	// SchemeStandard is Standard Webhooks (standardwebhooks.com):
	// webhook-id, webhook-timestamp and webhook-signature: v1,<base64>,
	// keyed with the secret shown as whsec_<base64>.
	SchemeStandard = "standard"
)

// ValidScheme reports whether s names a signature scheme ("" included:
// the default).
func ValidScheme(s string) bool {
	return s == "" || s == SchemeRxgate || s == SchemeStandard
}

// Scheme is the endpoint's signature scheme, SchemeRxgate when unset.
func (e *WebhookEndpoint) Scheme() string {
	if e.SignatureScheme == "" {
		return SchemeRxgate
	}
	return e.SignatureScheme
}

// SigningSecrets returns the secrets a delivery sent at now is signed with:
// while the previous secret's grace period runs, the previous one first,
// then the current one ("old and new"), so that a receiver that reads only
// the first v1 and has not yet deployed the new secret keeps verifying
// during the grace period, which is what the grace period is for; a
// receiver that checks every v1 verifies with either secret.
func (e *WebhookEndpoint) SigningSecrets(now time.Time) []string {
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		return []string{e.PreviousSecret, e.Secret}
	}
	return []string{e.Secret}
}

// Rotate makes secret the signing secret at now. The secret it replaces
// keeps signing too until graceUntil; a secret replaced earlier stops at
// once, so at most two signatures are ever sent.
func (e *WebhookEndpoint) Rotate(secret string, now, graceUntil time.Time) {
	now = Timestamp(now)
	e.PreviousSecret, e.PreviousUntil = e.Secret, Timestamp(graceUntil)
	e.Secret = secret
	e.RotatedAt = &now
}

// OperatorKey is a named credential of the operator listener (the operator
// API and the console) with a role: admin, operator, viewer or
// partner:<partner id> (the HTTP layer gives them meaning). Only the SHA-256 of its
// secret is stored (HashSecret). Its name is unique among every key ever
// created, revoked ones included, so that a name names one key for good.
type OperatorKey struct {
	ID         string
	Name       string
	Role       string
	SecretHash []byte
	CreatedAt  time.Time
	// RevokedAt is when the key was revoked; nil while it works.
	RevokedAt *time.Time
}

// Revoked reports whether k has been revoked.
func (k *OperatorKey) Revoked() bool { return k.RevokedAt != nil }
