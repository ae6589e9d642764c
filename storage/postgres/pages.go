package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

// The prescription page (ListPrescriptionsJSON, GetMemberPrescriptionsJSON)
// is one statement, so one round trip and one snapshot with no BEGIN or
// COMMIT, which reads the patient and the page's rows and, with
// GetMemberPrescriptionsJSON, the member a partner request authenticates
// with (GetMember's row): on make bench-backends' page, the two round
// trips and five statements of GetMember and a pipelined transaction
// cost PostgreSQL and the replica more than the reads themselves
// (BenchmarkPageCost).
//
// The page's version. The statement also returns the version of what the
// page is built from: the patient's row and the rows of the page
// (limit+1, the one after it included, which says whether there is a next
// page), each as its tuple's (xmin, ctid). Rows are never changed in
// place: an UPDATE writes a new tuple, with the updating transaction's id
// as xmin, at a new ctid; an INSERT or a DELETE adds or removes an entry
// of the list. So two snapshots that see the same version see the same
// tuples, so the same bytes. (A tuple at the ctid of one seen before with
// the same xmin would need the transaction ids to wrap around, 2^32 of
// them, while the process holds the old version.) Each process remembers
// the last page it built for a patient, limit and cursor with its version
// (pageCache); the statement is sent the remembered version and, when it
// is still the version it reads, leaves the page's bytes out: the process
// serves what it remembered, checked at the statement's snapshot. The
// check is in the database, at the snapshot of every read, so it holds
// with any number of replicas writing; nothing is cached that the
// statement does not check.
const (
	pageSQL = `WITH pr AS MATERIALIZED (
		SELECT position, xmin::text || ctid::text AS v FROM prescriptions
		WHERE org_id = $1 AND user_id = $2 AND patient_id = $3 AND position > $4 ORDER BY position LIMIT $5 + 1
	), pg AS MATERIALIZED (
		SELECT pt.org_id, pt.user_id, pt.id, pt.partner_patient_id, pt.record, pt.created_at, pt.updated_at,
			pt.xmin::text || pt.ctid::text || '|' || coalesce((SELECT string_agg(v, ',' ORDER BY position) FROM pr), '') AS version,
			(SELECT count(*)::int FROM pr) AS n
		FROM patients pt WHERE pt.org_id = $1 AND pt.user_id = $2 AND pt.id = $3
	)`
	// The rows' bytes are read only when the version is not the
	// remembered one, by a scan of their own (at the statement's
	// snapshot, so the rows pr read).
	pageColsSQL = `pg.org_id, pg.user_id, pg.id, pg.partner_patient_id, pg.record, pg.created_at, pg.updated_at, pg.version,
		CASE WHEN pg.version IS DISTINCT FROM $6 THEN (SELECT string_agg(record, ','::bytea ORDER BY position) FROM (
			SELECT position, record FROM prescriptions
			WHERE org_id = $1 AND user_id = $2 AND patient_id = $3 AND position > $4 ORDER BY position LIMIT $5) f) END,
		pg.n,
		CASE WHEN pg.version IS DISTINCT FROM $6 THEN (SELECT position FROM pr ORDER BY position OFFSET greatest($5 - 1, 0) LIMIT 1) END`
	listPageSQL   = pageSQL + ` SELECT ` + pageColsSQL + ` FROM pg`
	memberPageSQL = pageSQL + ` SELECT o.id, o.partner_id, o.name, o.allowed_scopes, o.secret_hash, o.validated_at, o.created_at,
			u.org_id, u.id, u.email, u.given_name, u.family_name, u.title, u.role, u.disabled, u.disabled_at, u.created_at, u.updated_at,
			` + pageColsSQL + `
		FROM organizations o JOIN users u ON u.org_id = o.id LEFT JOIN pg ON true WHERE o.id = $1 AND u.id = $7`
)

// ListPrescriptionsJSON implements storage.Store: the patient and one page
// of the stored objects, copied as stored, at one snapshot; keyset
// pagination on the position index. See above.
func (s *Store) ListPrescriptionsJSON(ctx context.Context, orgID, userID, patientID string, req storage.PageRequest, dst []byte) (*storage.Patient, []byte, storage.PageInfo, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID, patientID) {
		return nil, nil, storage.PageInfo{Limit: req.Limit}, fmt.Errorf("storage: list prescriptions: %w", storage.ErrNotFound)
	}
	pr, err := s.startPage(orgID, userID, patientID, req)
	if err != nil {
		return nil, nil, storage.PageInfo{Limit: req.Limit}, err
	}
	row := s.pool.QueryRow(ctx, listPageSQL, orgID, userID, patientID, string(pr.after), req.Limit, pr.knownVersion())
	err = pr.scan(row)
	s.switched.after(err)
	if err != nil {
		return nil, nil, storage.PageInfo{Limit: req.Limit}, wrap("list prescriptions", err)
	}
	return s.endPage(pr, dst)
}

// GetMemberPrescriptionsJSON implements storage.MemberPageReader: GetMember
// and ListPrescriptionsJSON in one statement (above).
func (s *Store) GetMemberPrescriptionsJSON(ctx context.Context, orgID, memberID, userID, patientID string, req storage.PageRequest, dst []byte) (*storage.MemberPage, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, memberID) {
		return nil, fmt.Errorf("storage: get member: %w", storage.ErrNotFound)
	}
	mp := &storage.MemberPage{Info: storage.PageInfo{Limit: req.Limit}}
	if !storage.ValidIDs(userID, patientID) {
		mp.PageErr = fmt.Errorf("storage: list prescriptions: %w", storage.ErrNotFound)
		// The member alone.
		var err error
		mp.Org, mp.User, err = s.GetMember(ctx, orgID, memberID)
		if err != nil {
			return nil, err
		}
		return mp, nil
	}
	pr, err := s.startPage(orgID, userID, patientID, req)
	if err != nil {
		mp.PageErr = err
		if mp.Org, mp.User, err = s.GetMember(ctx, orgID, memberID); err != nil {
			return nil, err
		}
		return mp, nil
	}
	var o storage.Organization
	var u storage.User
	var disabledAt *time.Time
	dest := []any{&o.ID, &o.PartnerID, &o.Name, &o.AllowedScopes, &o.SecretHash, &o.ValidatedAt, &o.CreatedAt,
		&u.OrgID, &u.ID, &u.Email, &u.GivenName, &u.FamilyName, &u.Title, &u.Role, &u.Disabled, &disabledAt, &u.CreatedAt, &u.UpdatedAt}
	row := s.pool.QueryRow(ctx, memberPageSQL, orgID, userID, patientID, string(pr.after), req.Limit, pr.knownVersion(), memberID)
	err = pr.scanWith(row, dest)
	s.switched.after(err)
	if err != nil {
		return nil, wrap("get member", err)
	}
	o.CreatedAt, o.ValidatedAt = utc(o.CreatedAt), utcp(o.ValidatedAt)
	u.DisabledAt, u.CreatedAt, u.UpdatedAt = orZero(disabledAt), utc(u.CreatedAt), utc(u.UpdatedAt)
	mp.Org, mp.User = &o, &u
	if pr.version == nil {
		mp.PageErr = fmt.Errorf("storage: list prescriptions: %w", storage.ErrNotFound)
		return mp, nil
	}
	mp.Patient, mp.Items, mp.Info, mp.PageErr = s.endPage(pr, dst)
	return mp, nil
}

// pageRead is one reading of a prescription page.
type pageRead struct {
	key   string
	first storage.Page
	after []byte
	known *pageEntry // the page remembered for key, if any
	slot  *atomic.Pointer[pageEntry]

	// What the statement returned. The patient's columns are NULL, in
	// GetMemberPrescriptionsJSON's, when the patient does not exist.
	orgID, userID, patientID, ppid *string
	created, updated               *time.Time
	patientRaw                     []byte
	version                        *string
	items                          []byte
	count                          *int32
	lastPos                        []byte
}

func (s *Store) startPage(orgID, userID, patientID string, req storage.PageRequest) (*pageRead, error) {
	first, after, err := s.cursors.StartPage(storage.PrescriptionList(orgID, userID, patientID), req)
	if err != nil {
		return nil, fmt.Errorf("storage: list prescriptions: %w", err)
	}
	pr := &pageRead{first: first, after: after}
	pr.key = fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%d", orgID, userID, patientID, after, req.Limit)
	pr.slot = &s.pages.slots[xxhash.Sum64String(pr.key)%uint64(len(s.pages.slots))]
	if e := pr.slot.Load(); e != nil && e.key == pr.key {
		pr.known = e
	}
	return pr, nil
}

// knownVersion is the statement's $6: the remembered page's version, or
// NULL.
func (pr *pageRead) knownVersion() *string {
	if pr.known == nil {
		return nil
	}
	return &pr.known.version
}

func (pr *pageRead) scan(row pgx.Row) error { return pr.scanWith(row, nil) }

// scanWith scans the page's columns after dest's.
func (pr *pageRead) scanWith(row pgx.Row, dest []any) error {
	return row.Scan(append(dest, &pr.orgID, &pr.userID, &pr.patientID, &pr.ppid, &pr.patientRaw, &pr.created, &pr.updated,
		&pr.version, &pr.items, &pr.count, &pr.lastPos)...)
}

// endPage builds the page read (or takes the remembered one, when the
// statement said it is current), remembers it, and appends its items to
// dst.
func (s *Store) endPage(pr *pageRead, dst []byte) (*storage.Patient, []byte, storage.PageInfo, error) {
	e := pr.known
	if e == nil || *pr.version != e.version {
		var r patientRecord
		if err := json.Unmarshal(pr.patientRaw, &r); err != nil {
			return nil, nil, storage.PageInfo{}, fmt.Errorf("storage: decode patient: %w", err)
		}
		p := storage.Patient{OrgID: *pr.orgID, UserID: *pr.userID, ID: *pr.patientID}
		if pr.ppid != nil {
			p.PartnerPatientID = *pr.ppid
		}
		p.PatientFields, p.Verifications = r.PatientFields, r.Verifications
		p.CreatedAt, p.UpdatedAt = utc(*pr.created), utc(*pr.updated)
		page := pr.first
		n := int(*pr.count)
		for range n {
			if !page.Take() {
				break
			}
		}
		e = &pageEntry{key: pr.key, version: *pr.version, patient: p, items: pr.items, info: page.Info(pr.lastPos)}
		if len(e.items) <= maxRememberedPage {
			pr.slot.Store(e)
		}
	}
	p := e.patient
	out := append(dst, '[')
	out = append(out, e.items...)
	return &p, append(out, ']'), e.info, nil
}

// pageCache holds the pages a process read last (see above): a fixed
// table, where two pages sharing a slot evict each other.
type pageCache struct {
	slots [256]atomic.Pointer[pageEntry]
}

// maxRememberedPage bounds a remembered page's bytes, and so the cache's
// to len(slots) times it.
const maxRememberedPage = 256 << 10

// pageEntry is a remembered page: its items (the stored objects joined by
// commas), the patient and the page's description, at version.
type pageEntry struct {
	key, version string
	patient      storage.Patient
	items        []byte
	info         storage.PageInfo
}
