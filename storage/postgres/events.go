package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

const eventCols = `id, type, org_id, partner_id, created_at, payload, status, skip_reason, round, targets, attempts`

// eventSelect reads eventCols; a test event's NULL organization reads as
// "".
const eventSelect = `id, type, COALESCE(org_id, ''), partner_id, created_at, payload, status, skip_reason, round, targets, attempts`

// orgParam is an event's organization as written: NULL for none (a
// webhook.test event).
func orgParam(id string) any {
	if id == "" {
		return nil
	}
	return id
}

// list encodes targets or attempts; an empty list is stored as null and
// read back as nil, as the other backend gives it.
func list[T any](v []T) ([]byte, error) {
	if len(v) == 0 {
		return []byte("null"), nil
	}
	return json.Marshal(v)
}

// eventLists encodes an event's targets and attempts.
func eventLists(ev *storage.Event) (targets, attempts []byte, err error) {
	if targets, err = list(ev.Targets); err != nil {
		return nil, nil, err
	}
	attempts, err = list(ev.Attempts)
	return targets, attempts, err
}

func scanEvent(row pgx.Row) (*storage.Event, error) {
	var e storage.Event
	var targets, attempts []byte
	if err := row.Scan(&e.ID, &e.Type, &e.OrganizationID, &e.PartnerID, &e.CreatedAt, &e.Payload, &e.Status, &e.SkipReason, &e.Round, &targets, &attempts); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(targets, &e.Targets); err != nil {
		return nil, fmt.Errorf("storage: decode event targets: %w", err)
	}
	if err := json.Unmarshal(attempts, &e.Attempts); err != nil {
		return nil, fmt.Errorf("storage: decode event attempts: %w", err)
	}
	e.CreatedAt = utc(e.CreatedAt)
	return &e, nil
}

// insertEvent writes a new event and its jobs, and wakes the queues when
// there are jobs.
func insertEvent(ctx context.Context, tx pgx.Tx, ev *storage.Event, jobs []storage.Job) error {
	targets, attempts, err := eventLists(ev)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO events (`+eventCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		ev.ID, ev.Type, orgParam(ev.OrganizationID), ev.PartnerID, ev.CreatedAt, ev.Payload, ev.Status, ev.SkipReason, ev.Round, targets, attempts)
	if err != nil {
		return err
	}
	return insertJobs(ctx, tx, jobs)
}

// updateEvent writes an event's status, round, targets and attempts.
func updateEvent(ctx context.Context, tx pgx.Tx, ev *storage.Event) error {
	targets, attempts, err := eventLists(ev)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE events SET status = $2, skip_reason = $3, round = $4, targets = $5, attempts = $6 WHERE id = $1`,
		ev.ID, ev.Status, ev.SkipReason, ev.Round, targets, attempts)
	return err
}

// insertJobs writes new pending jobs; the caller wakes the queues after
// the commit (Store.queued).
func insertJobs(ctx context.Context, tx pgx.Tx, jobs []storage.Job) error {
	if len(jobs) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, insertJobsSQL, jobArrays(jobs)...)
	return err
}

// insertJobsSQL writes new pending jobs, given as arrays, and their
// endpoints' claim slots (claim_slots) where they have none yet. An
// existing slot is left as it is, unlocked, even while a claim holds it.
const insertJobsSQL = `WITH slots AS (
		INSERT INTO claim_slots (endpoint_id) SELECT DISTINCT endpoint_id FROM unnest($3::text[]) AS e (endpoint_id)
		ORDER BY 1 ON CONFLICT DO NOTHING)
	INSERT INTO jobs (id, event_id, endpoint_id, round, attempts, due, owner)
	SELECT id, event_id, endpoint_id, round, attempts, due, ''
	FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::integer[], $6::timestamptz[])
		AS t (id, event_id, endpoint_id, round, attempts, due)`

// jobArrays are jobs as insertJobsSQL's arguments.
func jobArrays(jobs []storage.Job) []any {
	ids, events, endpoints := make([]string, len(jobs)), make([]string, len(jobs)), make([]string, len(jobs))
	rounds, attempts, due := make([]int32, len(jobs)), make([]int32, len(jobs)), make([]time.Time, len(jobs))
	for i, j := range jobs {
		ids[i], events[i], endpoints[i] = j.ID, j.EventID, j.EndpointID
		rounds[i], attempts[i], due[i] = int32(j.Round), int32(j.Attempts), j.Due
	}
	return []any{ids, events, endpoints, rounds, attempts, due}
}

// GetEvent implements storage.Store.
func (s *Store) GetEvent(ctx context.Context, id string) (*storage.Event, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: get event: %w", storage.ErrNotFound)
	}
	e, err := scanEvent(s.pool.QueryRow(ctx, `SELECT `+eventSelect+` FROM events WHERE id = $1`, id))
	return e, wrap("get event", err)
}

// ListEvents implements storage.Store: keyset pagination on the event id
// (version-7 uuids, so oldest first) within the filter's index.
func (s *Store) ListEvents(ctx context.Context, f storage.EventFilter, req storage.PageRequest) ([]storage.Event, storage.PageInfo, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	out := make([]storage.Event, 0, req.Limit)
	if !f.Matchable() {
		return out, storage.PageInfo{Limit: req.Limit}, nil
	}
	page, after, err := s.cursors.StartPage(storage.EventList(f), req)
	if err != nil {
		return nil, storage.PageInfo{Limit: req.Limit}, fmt.Errorf("storage: list events: %w", err)
	}
	if f.PartnerID != "" && f.OrganizationID != "" {
		// An organization's events are all its partner's: another
		// partner's organization lists nothing, as one that does not
		// exist does, without reading its events.
		var partner string
		err := s.pool.QueryRow(ctx, `SELECT partner_id FROM organizations WHERE id = $1`, f.OrganizationID).Scan(&partner)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return nil, storage.PageInfo{Limit: req.Limit}, wrap("list events", err)
		}
		if partner != f.PartnerID {
			return out, storage.PageInfo{Limit: req.Limit}, nil
		}
	}
	where, args := []string{"id > $1"}, []any{string(after)}
	if f.PartnerID != "" {
		args = append(args, f.PartnerID)
		where = append(where, "partner_id = $"+strconv.Itoa(len(args)))
	}
	if f.OrganizationID != "" {
		args = append(args, f.OrganizationID)
		where = append(where, "org_id = $"+strconv.Itoa(len(args)))
	}
	if f.Status != "" {
		args = append(args, f.Status)
		where = append(where, "status = $"+strconv.Itoa(len(args)))
	}
	args = append(args, req.Limit+1)
	rows, err := s.pool.Query(ctx, `SELECT `+eventSelect+` FROM events WHERE `+strings.Join(where, " AND ")+
		` ORDER BY id LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, storage.PageInfo{Limit: req.Limit}, wrap("list events", err)
	}
	events, err := collect(rows, scanEvent)
	if err != nil {
		return nil, storage.PageInfo{Limit: req.Limit}, wrap("list events", err)
	}
	events, info := storage.PageOf(&page, events, func(e *storage.Event) string { return e.ID })
	return append(out, events...), info, nil
}

// ReplayEvent implements storage.Store: a new round to every endpoint of
// the event's partner, due now.
func (s *Store) ReplayEvent(ctx context.Context, id string) (*storage.Event, error) {
	return s.replayEvent(ctx, id, "", s.nowUTC())
}

// ReplayEventTo implements storage.Store.
func (s *Store) ReplayEventTo(ctx context.Context, id, endpointID string, due time.Time) (*storage.Event, error) {
	if !storage.ValidID(endpointID) {
		return nil, fmt.Errorf("storage: replay event: %w", storage.ErrNotFound)
	}
	return s.replayEvent(ctx, id, endpointID, due)
}

// replayEvent starts a new round of the event, due at due: to endpointID,
// which must be one of its partner's, or to every endpoint of its partner
// when endpointID is "".
func (s *Store) replayEvent(ctx context.Context, id, endpointID string, due time.Time) (*storage.Event, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(id) {
		return nil, fmt.Errorf("storage: replay event: %w", storage.ErrNotFound)
	}
	var ev *storage.Event
	err := s.tx(ctx, serializable, func(tx pgx.Tx) error {
		var err error
		if ev, err = scanEvent(tx.QueryRow(ctx, `SELECT `+eventSelect+` FROM events WHERE id = $1 FOR UPDATE`, id)); err != nil {
			return err
		}
		var validatedAt *time.Time
		if err := tx.QueryRow(ctx, `SELECT validated_at FROM organizations WHERE id = $1`, ev.OrganizationID).Scan(&validatedAt); err != nil {
			return fmt.Errorf("organization %w", mapErr(err))
		}
		var endpoints []string
		if endpointID == "" {
			if endpoints, err = partnerEndpointIDs(ctx, tx, ev.PartnerID); err != nil {
				return err
			}
		} else {
			var ok bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM webhook_endpoints WHERE id = $1 AND partner_id = $2)`, endpointID, ev.PartnerID).Scan(&ok); err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("endpoint %w", storage.ErrNotFound)
			}
			endpoints = []string{endpointID}
		}
		if err := ev.CheckReplay(validatedAt != nil, len(endpoints)); err != nil {
			return err
		}
		jobs := ev.StartRound(true, endpoints, due)
		if err := updateEvent(ctx, tx, ev); err != nil {
			return err
		}
		return insertJobs(ctx, tx, jobs)
	})
	if err != nil {
		return nil, wrap("replay event", err)
	}
	s.queued()
	return ev, nil
}

// purgeBatch bounds the events one purge transaction deletes.
const purgeBatch = 256

// purgeBatchSQL deletes one batch: the next purgeBatch events after $4 and
// before $5 in the primary key, of those the ones created before $1 that
// are not pending. It reads the id, how many it looked at and how many it
// deleted.
const purgeBatchSQL = `WITH batch AS (
		SELECT id FROM events WHERE id > $4 AND id < $5 ORDER BY id LIMIT $3),
	gone AS (
		DELETE FROM events WHERE id IN (SELECT id FROM batch) AND created_at < $1 AND status <> $2 RETURNING id)
	SELECT (SELECT max(id) FROM batch), (SELECT count(*) FROM batch), (SELECT count(*) FROM gone)`

// purgeBound is the primary key's upper bound of a purge before cutoff:
// the smallest event id of the millisecond after the cutoff's. An event's
// id carries its creation time (storage.NewIDAt), so every event created
// before the cutoff sorts below it, and what the scan reads beyond the
// cutoff is at most a millisecond's events, which the created_at check
// keeps.
func purgeBound(cutoff time.Time) string {
	return storage.MinIDAt(cutoff.Truncate(time.Millisecond).Add(time.Millisecond))
}

// PurgeEvents implements storage.Store, in batches of purgeBatch; the
// events' jobs go with them (there are none once an event is no longer
// pending).
// The scan walks the primary key's range from the start to the cutoff's
// id (purgeBound), never the newer events a retention keeps: each batch
// starts after the last id the one before it looked at. The outer WHERE
// repeats the rule: an event replayed since the inner SELECT read it is
// pending again and stays (the DELETE re-checks it after waiting for the
// replay's row lock).
func (s *Store) PurgeEvents(ctx context.Context, cutoff time.Time) (int, error) {
	purged := 0
	after, bound := "", purgeBound(cutoff)
	for {
		// Each batch within the call's bound: a purge of a long retention
		// backlog takes as many as it needs.
		bctx, cancel := s.bound(ctx)
		var last *string
		var looked, deleted int
		err := s.pool.QueryRow(bctx, purgeBatchSQL, cutoff, storage.EventPending, purgeBatch, after, bound).Scan(&last, &looked, &deleted)
		cancel()
		if err != nil {
			return purged, wrap("purge events", err)
		}
		purged += deleted
		if looked < purgeBatch || last == nil {
			return purged, nil
		}
		after = *last
	}
}

// CreateTestEvent implements storage.Store: the event's org_id is NULL.
func (s *Store) CreateTestEvent(ctx context.Context, endpointID string) (*storage.Event, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !storage.ValidID(endpointID) {
		return nil, fmt.Errorf("storage: create test event: %w", storage.ErrNotFound)
	}
	now := s.nowUTC()
	var ev *storage.Event
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		ep, err := scanEndpoint(tx.QueryRow(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints WHERE id = $1`, endpointID))
		if err != nil {
			return fmt.Errorf("webhook endpoint %w", mapErr(err))
		}
		var jobs []storage.Job
		if ev, jobs, err = storage.NewWebhookTest(ep, now); err != nil {
			return err
		}
		return insertEvent(ctx, tx, ev, jobs)
	})
	if err != nil {
		return nil, wrap("create test event", err)
	}
	s.queued()
	return ev, nil
}
