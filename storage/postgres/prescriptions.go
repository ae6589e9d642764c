package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rxgate/rxgate/storage"
)

// CreatePrescription implements storage.Store: the prescription, its
// event and the event's jobs in one pipelined transaction of two round
// trips, audited or not: BEGIN and the reads (the organization, the
// patient and user, the partner's endpoints); then the three INSERTs and
// COMMIT. Once a process has read them for an organization, user and
// patient, its creates for them take one round trip (queueCreateChecks).
//
// The event depends on the organization's validation and the partner's
// endpoints, read before the writes; what orders the create against the
// writes that change them:
//
//   - The organization's row is read FOR KEY SHARE, the lock the event's
//     foreign key (events.org_id) takes on it anyway, so it costs nothing
//     the INSERT would not. ValidateOrganization locks the row FOR UPDATE,
//     which that lock excludes: a validation comes wholly before the
//     create (which then waits for it and reads the validated row) or
//     wholly after it (it waits for the create's commit).
//   - Endpoints are read in a statement after that lock is held, so with
//     a snapshot taken after it. CreateWebhookEndpoint and
//     DeleteWebhookEndpoint lock the partner's row and then every one of
//     its organizations' rows FOR UPDATE (lockPartnerCreates): they wait
//     for the creates in flight under any of them, and the creates that
//     start meanwhile wait for them and then read the endpoints as they
//     committed. An organization created meanwhile waits too (its foreign
//     key locks the partner's row).
//   - Nothing else a create reads changes under it: an organization never
//     changes partners, a secret rotation (SetOrganizationSecret,
//     SetPartnerSecret) changes no column the create reads and takes a
//     lock (FOR NO KEY UPDATE) that KEY SHARE does not exclude, so it
//     neither waits for creates nor they for it; an endpoint's secret
//     rotation changes its row, not the set of ids read. Disabling a user
//     is checked by the caller's authentication, before the create, as it
//     was with the share locks.
//
// So no create takes a lock on the partner's row, which would funnel
// every create of a hosting partner's organizations through one row
// (and its multixact), nor a share lock on the organization's row beyond
// the foreign key's. Row locks rather than a serializable transaction:
// under serializable isolation concurrent creates for one patient failed
// to serialize (predicate locks on shared index pages) until they ran
// out of retries.
func (s *Store) CreatePrescription(ctx context.Context, p *storage.Prescription) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	now := s.nowUTC() // the prescription's time and its event's
	if err := p.PrepareCreate(now); err != nil {
		return fmt.Errorf("storage: create prescription: %w", err)
	}
	key := createKey(p)
	var ev *storage.Event
	var jobs []storage.Job
	var err error
	if basis, ok := s.bases.get(key); ok {
		// One round trip (see createChecked); on a mismatch, the two.
		err = s.pipe(ctx, beginReadCommitted, func(ptx *pipeTx) error {
			b := ptx.batch()
			queueCreateChecks(b, p, basis)
			var err error
			if ev, jobs, err = s.queueCreate(b, p, basis, now); err != nil {
				return err
			}
			return ptx.commit(ctx, b)
		})
		if !stale(err) {
			return s.created(p, ev, jobs, err)
		}
		s.bases.drop(key)
	}
	var basis *createBasis
	err = s.pipe(ctx, beginReadCommitted, func(ptx *pipeTx) error {
		basis = &createBasis{}
		b := ptx.batch()
		b.Queue(`SELECT id, partner_id, validated_at FROM organizations WHERE id = $1 FOR KEY SHARE`, p.OrgID).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&basis.org.ID, &basis.org.PartnerID, &basis.org.ValidatedAt); err != nil {
				return fmt.Errorf("organization %w", mapErr(err))
			}
			return nil
		})
		b.Queue(`SELECT pt.partner_patient_id, u.id, u.title, u.given_name, u.family_name
			FROM patients pt JOIN users u ON u.org_id = pt.org_id AND u.id = pt.user_id
			WHERE pt.org_id = $1 AND pt.user_id = $2 AND pt.id = $3`, p.OrgID, p.UserID, p.PatientID).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&basis.ppid, &basis.user.ID, &basis.user.Title, &basis.user.GivenName, &basis.user.FamilyName); err != nil {
				return fmt.Errorf("patient %w", mapErr(err))
			}
			return nil
		})
		// A statement of its own: its snapshot is taken once the
		// organization's row is locked (see above).
		b.Queue(`SELECT w.id FROM webhook_endpoints w JOIN organizations o ON o.partner_id = w.partner_id
			WHERE o.id = $1 ORDER BY w.id`, p.OrgID).Query(func(rows pgx.Rows) error {
			var err error
			basis.endpoints, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
		if err := ptx.send(ctx, b); err != nil {
			return err
		}
		b = ptx.batch()
		var err error
		if ev, jobs, err = s.queueCreate(b, p, basis, now); err != nil {
			return err
		}
		return ptx.commit(ctx, b)
	})
	if err == nil {
		s.bases.put(key, basis)
	}
	return s.created(p, ev, jobs, err)
}

// created ends CreatePrescription.
func (s *Store) created(p *storage.Prescription, ev *storage.Event, jobs []storage.Job, err error) error {
	if err != nil {
		return wrap("create prescription", err)
	}
	p.EventStatus = ev.Status
	if len(jobs) > 0 {
		s.queued()
	}
	return nil
}

// createBasis is what a create reads besides its input: the organization
// (id, partner, validation), the patient's partner id, the user (the
// prescriber) and the partner's endpoints, in id order.
type createBasis struct {
	org       storage.Organization
	ppid      *string
	user      storage.User
	endpoints []string
}

// queueCreate builds p's event and jobs on basis and queues the three
// INSERTs on b.
func (s *Store) queueCreate(b *pgx.Batch, p *storage.Prescription, basis *createBasis, now time.Time) (*storage.Event, []storage.Job, error) {
	org, u := basis.org, basis.user
	p.Prescriber = u.Prescriber()
	endpoints := basis.endpoints
	if !org.Validated() {
		endpoints = nil
	}
	partnerPatientID := ""
	if basis.ppid != nil {
		partnerPatientID = *basis.ppid
	}
	ev, err := storage.NewPrescriptionCreated(p, partnerPatientID, &org, now)
	if err != nil {
		return nil, nil, err
	}
	jobs := ev.StartRound(org.Validated(), endpoints, now)
	raw, err := s.record(p)
	if err != nil {
		return nil, nil, err
	}
	targets, attempts, err := eventLists(ev)
	if err != nil {
		return nil, nil, err
	}
	b.Queue(`INSERT INTO prescriptions (org_id, user_id, patient_id, scid, position, created_at, record)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		p.OrgID, p.UserID, p.PatientID, p.SCID, string(storage.PrescriptionPosition(p.CreatedAt, p.SCID)), p.CreatedAt, raw)
	b.Queue(`INSERT INTO events (`+eventCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		ev.ID, ev.Type, ev.OrganizationID, ev.PartnerID, ev.CreatedAt, ev.Payload, ev.Status, ev.SkipReason, ev.Round, targets, attempts)
	if len(jobs) > 0 {
		b.Queue(insertJobsSQL, jobArrays(jobs)...)
	}
	return ev, jobs, nil
}

// The one-round-trip create. The two-round-trip create reads its basis
// (createBasis) in its first round trip and builds the event on it in
// Go; each process keeps the last basis it read for an organization,
// user and patient (createBases), and a create that finds one builds the
// event on it at once and sends, in one batch, BEGIN, three checks, the
// INSERTs and COMMIT. Each check is the corresponding read of the two
// round trips, at the same place in the transaction, under the same lock,
// comparing what it reads with the basis and failing with a division by
// zero when they differ (or the row is gone): the error aborts the
// transaction, PostgreSQL skips the rest of the batch, COMMIT included,
// and the create runs again on two round trips, which read a fresh
// basis. So a create that commits read, where the two-round-trip create
// reads them, the very values it built its event on, and the ordering
// argument above holds for it unchanged:
//
//   - the organization's check locks the row FOR KEY SHARE, as the read
//     does, and compares the row it locked (under READ COMMITTED, the
//     newest version once a validation holding FOR UPDATE has committed);
//   - the endpoints' check is a statement of its own after it, so its
//     snapshot is taken with the lock held, as the read's is;
//   - the patient's and user's check reads them as the read does.
//
// A client-side check would not do: the batch's INSERTs and COMMIT are on
// the wire before any result comes back, and only an error in the
// server stops them.
const (
	createCheckOrgSQL = `WITH o AS (SELECT partner_id, validated_at FROM organizations WHERE id = $1 FOR KEY SHARE)
		SELECT 1 / count(*)::int FROM o WHERE partner_id = $2 AND validated_at IS NOT DISTINCT FROM $3::timestamptz`
	createCheckPatientSQL = `SELECT 1 / count(*)::int
		FROM patients pt JOIN users u ON u.org_id = pt.org_id AND u.id = pt.user_id
		WHERE pt.org_id = $1 AND pt.user_id = $2 AND pt.id = $3 AND pt.partner_patient_id IS NOT DISTINCT FROM $4::text
			AND u.title = $5 AND u.given_name = $6 AND u.family_name = $7`
	createCheckEndpointsSQL = `SELECT 1 / (coalesce(array_agg(w.id ORDER BY w.id), '{}') = $2::text[])::int
		FROM webhook_endpoints w JOIN organizations o ON o.partner_id = w.partner_id
		WHERE o.id = $1`
)

// queueCreateChecks queues the one-round-trip create's checks (above).
func queueCreateChecks(b *pgx.Batch, p *storage.Prescription, basis *createBasis) {
	endpoints := basis.endpoints
	if endpoints == nil {
		endpoints = []string{}
	}
	b.Queue(createCheckOrgSQL, p.OrgID, basis.org.PartnerID, basis.org.ValidatedAt)
	b.Queue(createCheckPatientSQL, p.OrgID, p.UserID, p.PatientID, basis.ppid,
		basis.user.Title, basis.user.GivenName, basis.user.FamilyName)
	b.Queue(createCheckEndpointsSQL, p.OrgID, endpoints)
}

// stale reports whether err is a one-round-trip create's failed check.
func stale(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "22012" // division_by_zero
}

func createKey(p *storage.Prescription) string {
	return p.OrgID + "\x00" + p.UserID + "\x00" + p.PatientID
}

// createBases are a process's create bases, by organization, user and
// patient. A basis is only a guess: the one-round-trip create checks it in
// the database. The map is emptied when it reaches maxCreateBases.
type createBases struct {
	mu sync.Mutex
	m  map[string]*createBasis
}

const maxCreateBases = 4096

func (c *createBases) get(key string) (*createBasis, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[key]
	return b, ok
}

func (c *createBases) put(key string, b *createBasis) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCreateBases {
		c.m = make(map[string]*createBasis)
	}
	c.m[key] = b
}

func (c *createBases) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// UpdatePrescription implements storage.Store.
func (s *Store) UpdatePrescription(ctx context.Context, orgID, userID, patientID, scid string, fn func(*storage.Prescription) error) (*storage.Prescription, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidIDs(orgID, userID, patientID, scid) {
		return nil, fmt.Errorf("storage: update prescription: %w", storage.ErrNotFound)
	}
	var p storage.Prescription
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		var raw []byte
		err := tx.QueryRow(ctx, `SELECT created_at, record FROM prescriptions
			WHERE org_id = $1 AND scid = $2 AND user_id = $3 AND patient_id = $4 FOR UPDATE`, orgID, scid, userID, patientID).Scan(&p.CreatedAt, &raw)
		if err != nil {
			return err
		}
		created := utc(p.CreatedAt)
		p = storage.Prescription{}
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("storage: decode prescription: %w", err)
		}
		p.OrgID, p.UserID, p.PatientID, p.CreatedAt = orgID, userID, patientID, created
		if err := fn(&p); err != nil {
			return fnError{err}
		}
		p.OrgID, p.UserID, p.PatientID, p.CreatedAt = orgID, userID, patientID, created
		if raw, err = s.record(&p); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE prescriptions SET record = $3 WHERE org_id = $1 AND scid = $2`, orgID, scid, raw)
		return err
	})
	if err != nil {
		return nil, passThrough("update prescription", err)
	}
	return &p, nil
}
