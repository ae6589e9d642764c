package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

// record encodes a stored object, refusing one over limit before the
// database sees it.
func record(v any, limit int) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("storage: encode %T: %w", v, err)
	}
	if len(b) > limit {
		return nil, storage.ErrTooLarge
	}
	return b, nil
}

// record encodes a stored object within storage.max_record_bytes.
func (s *Store) record(v any) ([]byte, error) { return record(v, s.maxRecord) }

// utc returns t in UTC, as the other backend and JSON give times back.
func utc(t time.Time) time.Time { return t.UTC() }

func utcp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func orZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// --- partners ---

const partnerCols = `id, name, secret_hash, created_at`

func scanPartner(row pgx.Row) (*storage.Partner, error) {
	var p storage.Partner
	if err := row.Scan(&p.ID, &p.Name, &p.SecretHash, &p.CreatedAt); err != nil {
		return nil, err
	}
	p.CreatedAt = utc(p.CreatedAt)
	return &p, nil
}

// CreatePartner implements storage.Store.
func (s *Store) CreatePartner(ctx context.Context, p *storage.Partner) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := p.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create partner: %w", err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO partners (`+partnerCols+`) VALUES ($1, $2, $3, $4)`, p.ID, p.Name, p.SecretHash, p.CreatedAt)
	return wrap("create partner", err)
}

// GetPartner implements storage.Store.
func (s *Store) GetPartner(ctx context.Context, id string) (*storage.Partner, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get partner: %w", storage.ErrNotFound)
	}
	p, err := scanPartner(s.pool.QueryRow(ctx, `SELECT `+partnerCols+` FROM partners WHERE id = $1`, id))
	return p, wrap("get partner", err)
}

// ListPartners implements storage.Store.
func (s *Store) ListPartners(ctx context.Context) ([]storage.Partner, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+partnerCols+` FROM partners ORDER BY id`)
	if err != nil {
		return nil, wrap("list partners", err)
	}
	out, err := collect(rows, scanPartner)
	return out, wrap("list partners", err)
}

// SetPartnerSecret implements storage.Store.
func (s *Store) SetPartnerSecret(ctx context.Context, id string, hash []byte) (*storage.Partner, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: set partner secret: %w", storage.ErrNotFound)
	}
	p, err := scanPartner(s.pool.QueryRow(ctx, `UPDATE partners SET secret_hash = $2 WHERE id = $1 RETURNING `+partnerCols, id, hash))
	return p, wrap("set partner secret", err)
}

// collect scans every row with scan.
func collect[T any](rows pgx.Rows, scan func(pgx.Row) (*T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, rows.Err()
}

// --- organizations ---

const organizationCols = `id, partner_id, name, allowed_scopes, secret_hash, validated_at, created_at`

func scanOrganization(row pgx.Row) (*storage.Organization, error) {
	var o storage.Organization
	if err := row.Scan(&o.ID, &o.PartnerID, &o.Name, &o.AllowedScopes, &o.SecretHash, &o.ValidatedAt, &o.CreatedAt); err != nil {
		return nil, err
	}
	o.CreatedAt, o.ValidatedAt = utc(o.CreatedAt), utcp(o.ValidatedAt)
	return &o, nil
}

// CreateOrganization implements storage.Store.
func (s *Store) CreateOrganization(ctx context.Context, o *storage.Organization) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := o.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create organization: %w", err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO organizations (`+organizationCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		o.ID, o.PartnerID, o.Name, o.AllowedScopes, o.SecretHash, o.ValidatedAt, o.CreatedAt)
	return wrap("create organization", err)
}

// GetOrganization implements storage.Store.
func (s *Store) GetOrganization(ctx context.Context, id string) (*storage.Organization, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get organization: %w", storage.ErrNotFound)
	}
	o, err := scanOrganization(s.pool.QueryRow(ctx, `SELECT `+organizationCols+` FROM organizations WHERE id = $1`, id))
	return o, wrap("get organization", err)
}

// ListOrganizations implements storage.Store.
func (s *Store) ListOrganizations(ctx context.Context) ([]storage.Organization, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT `+organizationCols+` FROM organizations ORDER BY id`)
	if err != nil {
		return nil, wrap("list organizations", err)
	}
	out, err := collect(rows, scanOrganization)
	return out, wrap("list organizations", err)
}

// SetOrganizationSecret implements storage.Store.
func (s *Store) SetOrganizationSecret(ctx context.Context, id string, hash []byte) (*storage.Organization, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: set organization secret: %w", storage.ErrNotFound)
	}
	o, err := scanOrganization(s.pool.QueryRow(ctx, `UPDATE organizations SET secret_hash = $2 WHERE id = $1 RETURNING `+organizationCols, id, hash))
	return o, wrap("set organization secret", err)
}

// ValidateOrganization implements storage.Store: the first validation time
// stays. The row is locked FOR UPDATE before it is changed (a plain
// UPDATE of a column that is no key would take FOR NO KEY UPDATE only):
// so the validation is ordered against the prescriptions being created
// in the organization, which hold the row FOR KEY SHARE
// (CreatePrescription).
func (s *Store) ValidateOrganization(ctx context.Context, id string) (*storage.Organization, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: validate organization: %w", storage.ErrNotFound)
	}
	o, err := scanOrganization(s.pool.QueryRow(ctx,
		`WITH locked AS (SELECT id FROM organizations WHERE id = $1 FOR UPDATE)
		UPDATE organizations o SET validated_at = coalesce(o.validated_at, $2) FROM locked WHERE o.id = locked.id
		RETURNING `+prefixed("o.", organizationCols), id, s.nowUTC()))
	return o, wrap("validate organization", err)
}

// --- users ---

const userCols = `org_id, id, email, given_name, family_name, title, role, disabled, disabled_at, created_at, updated_at`

func scanUser(row pgx.Row) (*storage.User, error) {
	var u storage.User
	var disabledAt *time.Time
	if err := row.Scan(&u.OrgID, &u.ID, &u.Email, &u.GivenName, &u.FamilyName, &u.Title, &u.Role, &u.Disabled, &disabledAt, &u.CreatedAt, &u.UpdatedAt); err != nil {
		return nil, err
	}
	u.DisabledAt, u.CreatedAt, u.UpdatedAt = orZero(disabledAt), utc(u.CreatedAt), utc(u.UpdatedAt)
	return &u, nil
}

// CreateUser implements storage.Store.
func (s *Store) CreateUser(ctx context.Context, u *storage.User) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := u.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create user: %w", err)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO users (org_id, id, email, email_key, given_name, family_name, title, role, disabled, disabled_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		u.OrgID, u.ID, u.Email, strings.ToLower(u.Email), u.GivenName, u.FamilyName, u.Title, u.Role, u.Disabled, nullTime(u.DisabledAt), u.CreatedAt, u.UpdatedAt)
	return wrap("create user", err)
}

// GetUser implements storage.Store.
func (s *Store) GetUser(ctx context.Context, orgID, userID string) (*storage.User, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID) {
		return nil, fmt.Errorf("storage: get user: %w", storage.ErrNotFound)
	}
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE org_id = $1 AND id = $2`, orgID, userID))
	return u, wrap("get user", err)
}

// GetMember implements storage.Store: one query, so one point in time.
func (s *Store) GetMember(ctx context.Context, orgID, userID string) (*storage.Organization, *storage.User, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID) {
		return nil, nil, fmt.Errorf("storage: get member: %w", storage.ErrNotFound)
	}
	var o storage.Organization
	var u storage.User
	var disabledAt *time.Time
	err := s.pool.QueryRow(ctx, `SELECT o.id, o.partner_id, o.name, o.allowed_scopes, o.secret_hash, o.validated_at, o.created_at,
			u.org_id, u.id, u.email, u.given_name, u.family_name, u.title, u.role, u.disabled, u.disabled_at, u.created_at, u.updated_at
		FROM organizations o JOIN users u ON u.org_id = o.id WHERE o.id = $1 AND u.id = $2`, orgID, userID).Scan(
		&o.ID, &o.PartnerID, &o.Name, &o.AllowedScopes, &o.SecretHash, &o.ValidatedAt, &o.CreatedAt,
		&u.OrgID, &u.ID, &u.Email, &u.GivenName, &u.FamilyName, &u.Title, &u.Role, &u.Disabled, &disabledAt, &u.CreatedAt, &u.UpdatedAt)
	if err != nil {
		return nil, nil, wrap("get member", err)
	}
	o.CreatedAt, o.ValidatedAt = utc(o.CreatedAt), utcp(o.ValidatedAt)
	u.DisabledAt, u.CreatedAt, u.UpdatedAt = orZero(disabledAt), utc(u.CreatedAt), utc(u.UpdatedAt)
	return &o, &u, nil
}

// ListUsers implements storage.Store: keyset pagination on the primary
// key, so a deep page costs what the first does.
func (s *Store) ListUsers(ctx context.Context, orgID string, req storage.PageRequest) ([]storage.User, storage.PageInfo, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	info := storage.PageInfo{Limit: req.Limit}
	if !storage.ValidID(orgID) {
		return nil, info, fmt.Errorf("storage: list users: %w", storage.ErrNotFound)
	}
	page, after, err := s.cursors.StartPage(storage.UserList(orgID), req)
	if err != nil {
		return nil, info, fmt.Errorf("storage: list users: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+userCols+` FROM users WHERE org_id = $1 AND id > $2 ORDER BY id LIMIT $3`, orgID, string(after), req.Limit+1)
	if err != nil {
		return nil, info, wrap("list users", err)
	}
	users, err := collect(rows, scanUser)
	if err != nil {
		return nil, info, wrap("list users", err)
	}
	users, info = storage.PageOf(&page, users, func(u *storage.User) string { return u.ID })
	if users == nil {
		users = []storage.User{}
	}
	return users, info, nil
}

// SetUserDisabled implements storage.Store.
func (s *Store) SetUserDisabled(ctx context.Context, orgID, userID string, disabled bool) (*storage.User, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID) {
		return nil, false, fmt.Errorf("storage: set user disabled: %w", storage.ErrNotFound)
	}
	var u *storage.User
	changed := false
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		var err error
		changed = false
		if u, err = scanUser(tx.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE org_id = $1 AND id = $2 FOR UPDATE`, orgID, userID)); err != nil {
			return err
		}
		if u.Disabled == disabled {
			return nil
		}
		changed = true
		u.Disabled, u.Role, u.UpdatedAt = disabled, storage.RoleMember, s.nowUTC()
		if disabled {
			u.DisabledAt = storage.NextDisabledAt(u.DisabledAt, u.UpdatedAt)
			u.UpdatedAt = u.DisabledAt
		}
		_, err = tx.Exec(ctx, `UPDATE users SET disabled = $3, role = $4, updated_at = $5, disabled_at = $6 WHERE org_id = $1 AND id = $2`,
			orgID, userID, u.Disabled, u.Role, u.UpdatedAt, nullTime(u.DisabledAt))
		return err
	})
	if err != nil {
		return nil, false, wrap("set user disabled", err)
	}
	return u, changed, nil
}

// --- patients ---

// patientRecord is the stored part of a patient beyond its keys.
type patientRecord struct {
	storage.PatientFields
	Verifications []storage.Verification `json:"verifications,omitempty"`
}

const patientCols = `org_id, user_id, id, partner_patient_id, record, created_at, updated_at`

func scanPatient(row pgx.Row) (*storage.Patient, error) {
	var p storage.Patient
	var ppid *string
	var raw []byte
	if err := row.Scan(&p.OrgID, &p.UserID, &p.ID, &ppid, &raw, &p.CreatedAt, &p.UpdatedAt); err != nil {
		return nil, err
	}
	var r patientRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("storage: decode patient: %w", err)
	}
	if ppid != nil {
		p.PartnerPatientID = *ppid
	}
	p.PatientFields, p.Verifications = r.PatientFields, r.Verifications
	p.CreatedAt, p.UpdatedAt = utc(p.CreatedAt), utc(p.UpdatedAt)
	return &p, nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CreatePatient implements storage.Store.
func (s *Store) CreatePatient(ctx context.Context, p *storage.Patient) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := p.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create patient: %w", err)
	}
	raw, err := s.record(patientRecord{PatientFields: p.PatientFields, Verifications: p.Verifications})
	if err != nil {
		return fmt.Errorf("storage: create patient: %w", err)
	}
	_, err = s.execAudited(ctx, `INSERT INTO patients (`+patientCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		p.OrgID, p.UserID, p.ID, nullString(p.PartnerPatientID), raw, p.CreatedAt, p.UpdatedAt)
	return wrap("create patient", err)
}

// GetPatient implements storage.Store.
func (s *Store) GetPatient(ctx context.Context, orgID, userID, patientID string) (*storage.Patient, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID, patientID) {
		return nil, fmt.Errorf("storage: get patient: %w", storage.ErrNotFound)
	}
	p, err := scanPatient(s.pool.QueryRow(ctx, `SELECT `+patientCols+` FROM patients WHERE org_id = $1 AND user_id = $2 AND id = $3`, orgID, userID, patientID))
	return p, wrap("get patient", err)
}

// UpdatePatient implements storage.Store.
func (s *Store) UpdatePatient(ctx context.Context, orgID, userID, patientID string, fn func(*storage.Patient) error) (*storage.Patient, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID, patientID) {
		return nil, fmt.Errorf("storage: update patient: %w", storage.ErrNotFound)
	}
	var p *storage.Patient
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		old, err := scanPatient(tx.QueryRow(ctx, `SELECT `+patientCols+` FROM patients WHERE org_id = $1 AND user_id = $2 AND id = $3 FOR UPDATE`, orgID, userID, patientID))
		if err != nil {
			return err
		}
		p = old
		cp := *old
		if err := fn(&cp); err != nil {
			return fnError{err}
		}
		cp.OrgID, cp.UserID, cp.ID, cp.PartnerPatientID, cp.CreatedAt = old.OrgID, old.UserID, old.ID, old.PartnerPatientID, old.CreatedAt
		cp.UpdatedAt = s.nowUTC()
		raw, err := s.record(patientRecord{PatientFields: cp.PatientFields, Verifications: cp.Verifications})
		if err != nil {
			return err
		}
		p = &cp
		_, err = tx.Exec(ctx, `UPDATE patients SET record = $4, updated_at = $5 WHERE org_id = $1 AND user_id = $2 AND id = $3`, orgID, userID, patientID, raw, cp.UpdatedAt)
		return err
	})
	if err != nil {
		return nil, passThrough("update patient", err)
	}
	return p, nil
}

// passThrough wraps err as wrap does, but an error of an updater fn is
// returned as it is, as the contract says.
func passThrough(op string, err error) error {
	var fnErr fnError
	if errors.As(err, &fnErr) {
		return fnErr.err
	}
	return wrap(op, err)
}

// fnError carries an updater's error out of a transaction unchanged.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }
func (e fnError) Unwrap() error { return e.err }

// --- custom drugs ---

// CreateCustomDrugs implements storage.Store: in batches of up to 500, each
// one transaction; a drug whose id exists already is replaced.
func (s *Store) CreateCustomDrugs(ctx context.Context, drugs []storage.CustomDrug) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	const maxBatch = 500
	records := make([][]byte, len(drugs))
	for i := range drugs {
		d := &drugs[i]
		if err := d.PrepareCreate(); err != nil {
			return fmt.Errorf("storage: create custom drugs: %w", err)
		}
		raw, err := s.record(d)
		if err != nil {
			return fmt.Errorf("storage: create custom drugs: %w", err)
		}
		records[i] = raw
	}
	for start := 0; start < len(drugs); start += maxBatch {
		end := min(start+maxBatch, len(drugs))
		err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
			orgs, users, ids := make([]string, 0, end-start), make([]string, 0, end-start), make([]string, 0, end-start)
			checked := map[[2]string]bool{}
			for i := start; i < end; i++ {
				d := &drugs[i]
				owner := [2]string{d.OrgID, d.UserID}
				if !checked[owner] {
					q, args := `SELECT 1 FROM organizations WHERE id = $1 FOR SHARE`, []any{d.OrgID}
					if d.UserID != "" {
						q, args = `SELECT 1 FROM users WHERE org_id = $1 AND id = $2 FOR SHARE`, []any{d.OrgID, d.UserID}
					}
					var one int
					if err := tx.QueryRow(ctx, q, args...).Scan(&one); err != nil {
						return err
					}
					checked[owner] = true
				}
				orgs, users, ids = append(orgs, d.OrgID), append(users, d.UserID), append(ids, d.ID)
			}
			_, err := tx.Exec(ctx, `INSERT INTO custom_drugs (org_id, user_id, id, record)
				SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[])
				ON CONFLICT (org_id, user_id, id) DO UPDATE SET record = EXCLUDED.record`, orgs, users, ids, records[start:end])
			return err
		})
		if err != nil {
			return fmt.Errorf("storage: create custom drugs (%d stored before the error): %w", start, mapErr(err))
		}
	}
	return nil
}

// ListCustomDrugsJSON implements storage.Store.
func (s *Store) ListCustomDrugsJSON(ctx context.Context, orgID, userID string, dst []byte) ([]byte, int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID) {
		return dst, 0, fmt.Errorf("storage: list custom drugs: %w", storage.ErrNotFound)
	}
	out, n := append(dst, '['), 0
	err := s.tx(ctx, readOnly, func(tx pgx.Tx) error {
		out, n = append(dst, '['), 0
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM users WHERE org_id = $1 AND id = $2`, orgID, userID).Scan(&one); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT record FROM custom_drugs WHERE org_id = $1 AND user_id IN ('', $2) ORDER BY user_id <> '', id`, orgID, userID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var raw []byte
			if err := rows.Scan(&raw); err != nil {
				return err
			}
			if n > 0 {
				out = append(out, ',')
			}
			out = append(out, raw...)
			n++
		}
		return rows.Err()
	})
	if err != nil {
		return dst, 0, wrap("list custom drugs", err)
	}
	return append(out, ']'), n, nil
}

// UpdateCustomDrug implements storage.Store.
func (s *Store) UpdateCustomDrug(ctx context.Context, orgID, userID, drugID string, fn func(*storage.CustomDrug) error) (*storage.CustomDrug, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID, drugID) {
		return nil, fmt.Errorf("storage: update custom drug: %w", storage.ErrNotFound)
	}
	var d storage.CustomDrug
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		var raw []byte
		if err := tx.QueryRow(ctx, `SELECT record FROM custom_drugs WHERE org_id = $1 AND user_id = $2 AND id = $3 FOR UPDATE`, orgID, userID, drugID).Scan(&raw); err != nil {
			return err
		}
		d = storage.CustomDrug{OrgID: orgID, UserID: userID}
		if err := json.Unmarshal(raw, &d); err != nil {
			return fmt.Errorf("storage: decode custom drug: %w", err)
		}
		if err := fn(&d); err != nil {
			return fnError{err}
		}
		d.OrgID, d.UserID, d.ID = orgID, userID, drugID
		raw, err := s.record(&d)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE custom_drugs SET record = $4 WHERE org_id = $1 AND user_id = $2 AND id = $3`, orgID, userID, drugID, raw)
		return err
	})
	if err != nil {
		return nil, passThrough("update custom drug", err)
	}
	return &d, nil
}

// DeleteCustomDrug implements storage.Store.
func (s *Store) DeleteCustomDrug(ctx context.Context, orgID, userID, drugID string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID, drugID) {
		return fmt.Errorf("storage: delete custom drug: %w", storage.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM custom_drugs WHERE org_id = $1 AND user_id = $2 AND id = $3`, orgID, userID, drugID)
	if err == nil && tag.RowsAffected() == 0 {
		err = storage.ErrNotFound
	}
	return wrap("delete custom drug", err)
}

// --- webhook endpoints ---

const endpointCols = `id, partner_id, url, secret, previous_secret, previous_until, created_at, rotated_at, signature_scheme,
	failing_since, disabled_at, disabled_reason`

func scanEndpoint(row pgx.Row) (*storage.WebhookEndpoint, error) {
	var e storage.WebhookEndpoint
	var until *time.Time
	if err := row.Scan(&e.ID, &e.PartnerID, &e.URL, &e.Secret, &e.PreviousSecret, &until, &e.CreatedAt, &e.RotatedAt, &e.SignatureScheme,
		&e.FailingSince, &e.DisabledAt, &e.DisabledReason); err != nil {
		return nil, err
	}
	e.PreviousUntil, e.CreatedAt, e.RotatedAt = orZero(until), utc(e.CreatedAt), utcp(e.RotatedAt)
	e.FailingSince, e.DisabledAt = utcp(e.FailingSince), utcp(e.DisabledAt)
	return &e, nil
}

// CreateWebhookEndpoint implements storage.Store.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e *storage.WebhookEndpoint) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := e.PrepareCreate(s.now()); err != nil {
		return fmt.Errorf("storage: create webhook endpoint: %w", err)
	}
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		// Ordered against the prescriptions being created
		// (CreatePrescription).
		if err := lockPartnerCreates(ctx, tx, e.PartnerID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO webhook_endpoints (`+endpointCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			e.ID, e.PartnerID, e.URL, e.Secret, e.PreviousSecret, nullTime(e.PreviousUntil), e.CreatedAt, e.RotatedAt, e.Scheme(),
			e.FailingSince, e.DisabledAt, e.DisabledReason)
		return err
	})
	return wrap("create webhook endpoint", err)
}

// GetWebhookEndpoint implements storage.Store.
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (*storage.WebhookEndpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get webhook endpoint: %w", storage.ErrNotFound)
	}
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints WHERE id = $1`, id))
	return e, wrap("get webhook endpoint", err)
}

// ListWebhookEndpoints implements storage.Store.
func (s *Store) ListWebhookEndpoints(ctx context.Context, partnerID string) ([]storage.WebhookEndpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := []storage.WebhookEndpoint{}
	if partnerID != "" && !storage.ValidID(partnerID) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints WHERE $1 = '' OR partner_id = $1 ORDER BY id`, partnerID)
	if err != nil {
		return nil, wrap("list webhook endpoints", err)
	}
	es, err := collect(rows, scanEndpoint)
	if err != nil {
		return nil, wrap("list webhook endpoints", err)
	}
	return append(out, es...), nil
}

// DeleteWebhookEndpoint implements storage.Store.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return fmt.Errorf("storage: delete webhook endpoint: %w", storage.ErrNotFound)
	}
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		var partner string
		if err := tx.QueryRow(ctx, `SELECT partner_id FROM webhook_endpoints WHERE id = $1`, id).Scan(&partner); err != nil {
			return err
		}
		if err := lockPartnerCreates(ctx, tx, partner); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id)
		if err == nil && tag.RowsAffected() == 0 {
			err = storage.ErrNotFound
		}
		return err
	})
	return wrap("delete webhook endpoint", err)
}

// RotateWebhookSecret implements storage.Store.
func (s *Store) RotateWebhookSecret(ctx context.Context, id, secret string, graceUntil time.Time) (*storage.WebhookEndpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: rotate webhook secret: %w", storage.ErrNotFound)
	}
	now := s.nowUTC()
	var e *storage.WebhookEndpoint
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		var err error
		if e, err = scanEndpoint(tx.QueryRow(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints WHERE id = $1 FOR UPDATE`, id)); err != nil {
			return err
		}
		e.Rotate(secret, now, graceUntil)
		_, err = tx.Exec(ctx, `UPDATE webhook_endpoints SET secret = $2, previous_secret = $3, previous_until = $4, rotated_at = $5 WHERE id = $1`,
			id, e.Secret, e.PreviousSecret, nullTime(e.PreviousUntil), e.RotatedAt)
		return err
	})
	if err != nil {
		return nil, wrap("rotate webhook secret", err)
	}
	return e, nil
}

// SetWebhookSignatureScheme implements storage.Store.
func (s *Store) SetWebhookSignatureScheme(ctx context.Context, id, scheme string) (*storage.WebhookEndpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidScheme(scheme) {
		return nil, fmt.Errorf("storage: set signature scheme: unknown scheme %q", scheme)
	}
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: set signature scheme: %w", storage.ErrNotFound)
	}
	scheme = (&storage.WebhookEndpoint{SignatureScheme: scheme}).Scheme()
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `UPDATE webhook_endpoints SET signature_scheme = $2 WHERE id = $1 RETURNING `+endpointCols, id, scheme))
	return e, wrap("set signature scheme", err)
}

// DisableWebhookEndpoint implements storage.Store.
func (s *Store) DisableWebhookEndpoint(ctx context.Context, id, reason string) (*storage.WebhookEndpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: disable webhook endpoint: %w", storage.ErrNotFound)
	}
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `UPDATE webhook_endpoints
		SET disabled_at = COALESCE(disabled_at, $2), disabled_reason = CASE WHEN disabled_at IS NULL THEN $3 ELSE disabled_reason END
		WHERE id = $1 RETURNING `+endpointCols, id, s.nowUTC(), reason))
	return e, wrap("disable webhook endpoint", err)
}

// EnableWebhookEndpoint implements storage.Store; the queues wake for the
// endpoint's held jobs.
func (s *Store) EnableWebhookEndpoint(ctx context.Context, id string) (*storage.WebhookEndpoint, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: enable webhook endpoint: %w", storage.ErrNotFound)
	}
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `UPDATE webhook_endpoints
		SET disabled_at = NULL, disabled_reason = '', failing_since = NULL
		WHERE id = $1 RETURNING `+endpointCols, id))
	if err != nil {
		return nil, wrap("enable webhook endpoint", err)
	}
	s.queued()
	return e, nil
}

// partnerEndpointIDs lists the partner's endpoints in id order.
func partnerEndpointIDs(ctx context.Context, tx pgx.Tx, partnerID string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM webhook_endpoints WHERE partner_id = $1 ORDER BY id`, partnerID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// lockPartnerCreates orders a change to the partner's endpoints against
// the prescriptions being created under it (CreatePrescription): it locks
// the partner's row for update, so that no organization is created under
// it meanwhile (the organization's foreign key waits for the lock), and
// then, in a statement of its own that sees every organization
// committed by then, each of its organizations' rows, in id order, which
// the creates in flight hold FOR KEY SHARE: the change waits for them,
// and creates that start meanwhile wait for it. ErrNotFound when there is
// no such partner. A change to endpoints is rare; a create is not, and
// takes no lock for it beyond its foreign key's.
func lockPartnerCreates(ctx context.Context, tx pgx.Tx, id string) error {
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM partners WHERE id = $1 FOR UPDATE`, id).Scan(&one); err != nil {
		return fmt.Errorf("partner %w", mapErr(err))
	}
	_, err := tx.Exec(ctx, `SELECT 1 FROM organizations WHERE partner_id = $1 ORDER BY id FOR UPDATE`, id)
	return err
}

// prefixed qualifies each of a list of columns with prefix.
func prefixed(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}
