package badger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rxgate/rxgate/storage"
)

// On-disk encoding: one version byte, then JSON. A reader that meets a
// version it does not know fails loudly instead of guessing. Record structs
// are kept apart from the domain types so that a domain change is an
// explicit migration, not a silent change of the stored shape. Prescriptions
// and custom drugs store their API shape (the spec's member names), so a
// page can be served from stored bytes.
const recordV1 byte = 1

func encode(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("storage: encode %T: %w", v, err)
	}
	out := make([]byte, 0, len(b)+1)
	out = append(out, recordV1)
	return append(out, b...), nil
}

func decode(b []byte, v any) error {
	if len(b) == 0 || b[0] != recordV1 {
		return fmt.Errorf("storage: decode %T: unknown record version", v)
	}
	if err := json.Unmarshal(b[1:], v); err != nil {
		return fmt.Errorf("storage: decode %T: %w", v, err)
	}
	return nil
}

type partnerRecord struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	SecretHash []byte    `json:"secret_hash"`
	CreatedAt  time.Time `json:"created_at"`
}

func fromPartner(p *storage.Partner) partnerRecord {
	return partnerRecord{ID: p.ID, Name: p.Name, SecretHash: p.SecretHash, CreatedAt: p.CreatedAt}
}

func (r partnerRecord) partner() storage.Partner {
	return storage.Partner{ID: r.ID, Name: r.Name, SecretHash: r.SecretHash, CreatedAt: r.CreatedAt}
}

type organizationRecord struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	PartnerID     string     `json:"partner_id"`
	AllowedScopes []string   `json:"allowed_scopes"`
	SecretHash    []byte     `json:"secret_hash"`
	ValidatedAt   *time.Time `json:"validated_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
}

func fromOrganization(o *storage.Organization) organizationRecord {
	return organizationRecord{
		ID: o.ID, Name: o.Name, PartnerID: o.PartnerID, AllowedScopes: o.AllowedScopes,
		SecretHash: o.SecretHash, ValidatedAt: o.ValidatedAt, CreatedAt: o.CreatedAt,
	}
}

func (r organizationRecord) organization() storage.Organization {
	return storage.Organization{
		ID: r.ID, Name: r.Name, PartnerID: r.PartnerID, AllowedScopes: r.AllowedScopes,
		SecretHash: r.SecretHash, ValidatedAt: r.ValidatedAt, CreatedAt: r.CreatedAt,
	}
}

type userRecord struct {
	OrgID      string    `json:"org_id"`
	ID         string    `json:"id"`
	Email      string    `json:"email"`
	GivenName  string    `json:"given_name"`
	FamilyName string    `json:"family_name"`
	Title      string    `json:"title"`
	Role       string    `json:"role"`
	Disabled   bool      `json:"disabled"`
	DisabledAt time.Time `json:"disabled_at,omitzero"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

func fromUser(u *storage.User) userRecord {
	return userRecord{
		OrgID: u.OrgID, ID: u.ID, Email: u.Email, GivenName: u.GivenName, FamilyName: u.FamilyName,
		Title: u.Title, Role: string(u.Role), Disabled: u.Disabled, DisabledAt: u.DisabledAt, CreatedAt: u.CreatedAt, UpdatedAt: u.UpdatedAt,
	}
}

func (r userRecord) user() storage.User {
	return storage.User{
		OrgID: r.OrgID, ID: r.ID, Email: r.Email, GivenName: r.GivenName, FamilyName: r.FamilyName,
		Title: r.Title, Role: storage.Role(r.Role), Disabled: r.Disabled, DisabledAt: r.DisabledAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

type patientRecord struct {
	OrgID            string `json:"org_id"`
	UserID           string `json:"user_id"`
	ID               string `json:"id"`
	PartnerPatientID string `json:"partner_patient_id,omitempty"`
	storage.PatientFields
	Verifications []storage.Verification `json:"verifications,omitempty"`
	CreatedAt     time.Time              `json:"created_at"`
	UpdatedAt     time.Time              `json:"updated_at"`
}

func fromPatient(p *storage.Patient) patientRecord {
	return patientRecord{
		OrgID: p.OrgID, UserID: p.UserID, ID: p.ID, PartnerPatientID: p.PartnerPatientID,
		PatientFields: p.PatientFields, Verifications: p.Verifications,
		CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
}

func (r patientRecord) patient() storage.Patient {
	return storage.Patient{
		OrgID: r.OrgID, UserID: r.UserID, ID: r.ID, PartnerPatientID: r.PartnerPatientID,
		PatientFields: r.PatientFields, Verifications: r.Verifications,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

// Prescriptions and custom drugs have no separate record struct: their
// value is the API object itself (the spec's member names), and the owning
// ids and creation time come from the key.

type operatorKeyRecord struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	SecretHash []byte     `json:"secret_hash"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

func fromOperatorKey(k *storage.OperatorKey) operatorKeyRecord {
	return operatorKeyRecord{ID: k.ID, Name: k.Name, Role: k.Role, SecretHash: k.SecretHash, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

func (r operatorKeyRecord) operatorKey() storage.OperatorKey {
	return storage.OperatorKey{ID: r.ID, Name: r.Name, Role: r.Role, SecretHash: r.SecretHash, CreatedAt: r.CreatedAt, RevokedAt: r.RevokedAt}
}
