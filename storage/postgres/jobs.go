package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

// Every claim holds a transaction-scoped advisory lock (Store.claimLock):
// claims by all replicas take turns, so the per-endpoint limit, which
// counts every owner's leases, holds across replicas. A claim is one short
// transaction; recording outcomes, renewing and releasing leases take row
// locks only and run beside it.
//
// A lease's expiry is written and judged on one clock, the database's
// (leaseAt): a replica whose clock runs ahead cannot take back a live
// lease early, nor one whose clock lags keep a lapsed one. Due times stay
// on the replicas' clocks, which wrote them: a skew there only moves an
// attempt, while on a lease it would let two attempts of one job overlap.

// leaseTime is the SQL of a lease time passed as leaseAt's two parameters.
const leaseTime = `(coalesce(%s::timestamptz, now()) + %s::interval)`

// leaseAt returns, as the two parameters of leaseTime, a lease time t read
// on the caller's clock. With the database's clock (Options.Now nil) it is
// t's distance from this process's clock, applied to the database's now():
// what a queue means by "a minute from now" holds on the clock every
// replica's leases are judged by. With an injected clock (tests) it is t
// itself, so a fake clock drives leases as it drives everything else.
func (s *Store) leaseAt(t time.Time) (at *time.Time, offset time.Duration) {
	if !s.dbClock {
		t = storage.Timestamp(t)
		return &t, 0
	}
	return nil, t.Sub(s.now())
}

const jobCols = `id, event_id, endpoint_id, round, attempts, due, owner, lease_id, leased_until`

func scanJob(row pgx.Row) (*storage.Job, error) {
	var j storage.Job
	var round, attempts int32
	var leaseID *string
	var until *time.Time
	if err := row.Scan(&j.ID, &j.EventID, &j.EndpointID, &round, &attempts, &j.Due, &j.Owner, &leaseID, &until); err != nil {
		return nil, err
	}
	j.Round, j.Attempts, j.Due, j.LeasedUntil = int(round), int(attempts), utc(j.Due), orZero(until)
	if leaseID != nil {
		j.LeaseID = *leaseID
	}
	return &j, nil
}

// ClaimJobs implements storage.JobStore with storage.PlanClaim. Under the
// claim lock it reads the leases per endpoint, for the endpoints'
// allowances (storage.ClaimRequest.Allowance), then walks the endpoints
// that have pending jobs with a loose index scan of jobs_pending (one
// probe per endpoint, however long its backlog), and takes from each the
// first jobs in due order, as many as its allowance and one more: the due
// ones are candidates and the first one not taken tells the next due time.
// Rows another transaction is changing (a retry being recorded, a
// release, a reclaim) are skipped, not waited for (FOR UPDATE SKIP
// LOCKED). The two reads are two statements: a lease that ends between
// them counts against its endpoint's allowance in this claim, never for
// it, so the limit holds; the lease's end wakes the queue for the next.
func (s *Store) ClaimJobs(ctx context.Context, req storage.ClaimRequest) (storage.ClaimResult, error) {
	ctx, cancel := boundBy(ctx, s.claimTimeout)
	defer cancel()
	var res storage.ClaimResult
	untilAt, untilOffset := s.leaseAt(req.Now.Add(req.LeaseFor))
	req.Now = storage.Timestamp(req.Now)
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		res = storage.ClaimResult{}
		leasedBy, allows, err := s.lockClaims(ctx, tx, req)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			WITH RECURSIVE eps (endpoint_id) AS (
				(SELECT endpoint_id FROM jobs WHERE lease_id IS NULL ORDER BY endpoint_id LIMIT 1)
				UNION ALL
				SELECT (SELECT j.endpoint_id FROM jobs j WHERE j.lease_id IS NULL AND j.endpoint_id > eps.endpoint_id
					ORDER BY j.endpoint_id LIMIT 1)
				FROM eps WHERE eps.endpoint_id IS NOT NULL)
			SELECT e.endpoint_id, coalesce(l.allow, $1::int) AS allow, j.id, j.due
			FROM eps e
			LEFT JOIN unnest($2::text[], $3::int[]) AS l (endpoint_id, allow) ON l.endpoint_id = e.endpoint_id
			CROSS JOIN LATERAL (
				SELECT id, due FROM jobs
				WHERE endpoint_id = e.endpoint_id AND lease_id IS NULL
				ORDER BY due, id
				LIMIT coalesce(l.allow, $1::int) + 1
				FOR UPDATE SKIP LOCKED) j
			WHERE e.endpoint_id IS NOT NULL
			ORDER BY e.endpoint_id, j.due, j.id`, int32(req.Allowance(0)), leasedBy, allows)
		if err != nil {
			return err
		}
		var heads []storage.ClaimHead[string]
		for rows.Next() {
			var endpoint, id string
			var allow int
			var due time.Time
			if err := rows.Scan(&endpoint, &allow, &id, &due); err != nil {
				rows.Close()
				return err
			}
			if len(heads) == 0 || heads[len(heads)-1].Endpoint != endpoint {
				heads = append(heads, storage.ClaimHead[string]{Endpoint: endpoint, Allow: allow})
			}
			if h := &heads[len(heads)-1]; h.Takes(utc(due), req.Now) {
				h.Due = append(h.Due, id)
			}
		}
		if rows.Close(); rows.Err() != nil {
			return rows.Err()
		}
		plan := storage.PlanClaim(req, heads)
		res.NextDue = plan.NextDue
		if len(plan.Jobs) == 0 {
			return nil
		}
		leaseIDs := make([]string, len(plan.Jobs))
		for i := range leaseIDs {
			leaseIDs[i] = storage.NewID()
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET owner = $1, replica_id = $6, lease_id = t.lease_id, leased_until = `+fmt.Sprintf(leaseTime, "$2", "$5")+`
			FROM unnest($3::text[], $4::text[]) AS t (id, lease_id) WHERE jobs.id = t.id`,
			req.Owner, untilAt, plan.Jobs, leaseIDs, untilOffset, s.replicaID()); err != nil {
			return err
		}
		res.Jobs, err = claimedJobs(ctx, tx, plan.Jobs)
		return err
	})
	if err != nil {
		return storage.ClaimResult{}, wrap("claim jobs", err)
	}
	return res, nil
}

// lockClaims takes the claim lock and then reads, per endpoint with leased
// jobs, its allowance in the claim req; one round trip for both.
func (s *Store) lockClaims(ctx context.Context, tx pgx.Tx, req storage.ClaimRequest) (endpoints []string, allows []int32, err error) {
	var b pgx.Batch
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, s.claimLock)
	b.Queue(`SELECT endpoint_id, count(*)::int FROM jobs WHERE lease_id IS NOT NULL GROUP BY endpoint_id`).Query(func(rows pgx.Rows) error {
		var endpoint string
		var leased int
		_, err := pgx.ForEachRow(rows, []any{&endpoint, &leased}, func() error {
			endpoints, allows = append(endpoints, endpoint), append(allows, int32(req.Allowance(leased)))
			return nil
		})
		return err
	})
	// Close runs the batch, and the callback above with it: only then are
	// the results there to return.
	err = tx.SendBatch(ctx, &b).Close()
	return endpoints, allows, err
}

// claimedJobs reads the jobs just leased, in the order of ids, with their
// events' payloads and their endpoints.
func claimedJobs(ctx context.Context, tx pgx.Tx, ids []string) ([]storage.ClaimedJob, error) {
	rows, err := tx.Query(ctx, `SELECT j.id, j.event_id, j.endpoint_id, j.round, j.attempts, j.due, j.owner, j.lease_id, j.leased_until,
			e.payload, w.id, w.partner_id, w.url, w.secret, w.previous_secret, w.previous_until, w.created_at, w.rotated_at
		FROM unnest($1::text[]) WITH ORDINALITY AS t (id, n)
		JOIN jobs j ON j.id = t.id
		LEFT JOIN events e ON e.id = j.event_id
		LEFT JOIN webhook_endpoints w ON w.id = j.endpoint_id
		ORDER BY t.n`, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storage.ClaimedJob
	for rows.Next() {
		var c storage.ClaimedJob
		var round, attempts int32
		var leaseID *string
		var leasedUntil *time.Time
		var wID, wPartner, wURL, wSecret, wPrevious *string
		var wUntil, wCreated, wRotated *time.Time
		if err := rows.Scan(&c.ID, &c.EventID, &c.EndpointID, &round, &attempts, &c.Due, &c.Owner, &leaseID, &leasedUntil,
			&c.Payload, &wID, &wPartner, &wURL, &wSecret, &wPrevious, &wUntil, &wCreated, &wRotated); err != nil {
			return nil, err
		}
		c.Round, c.Attempts, c.Due, c.LeasedUntil = int(round), int(attempts), utc(c.Due), orZero(leasedUntil)
		if leaseID != nil {
			c.LeaseID = *leaseID
		}
		if wID != nil {
			c.Endpoint = &storage.WebhookEndpoint{
				ID: *wID, PartnerID: *wPartner, URL: *wURL, Secret: *wSecret, PreviousSecret: *wPrevious,
				PreviousUntil: orZero(wUntil), CreatedAt: orZero(wCreated), RotatedAt: utcp(wRotated),
			}
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// RenewLeases implements storage.JobStore.
func (s *Store) RenewLeases(ctx context.Context, jobs []storage.Job, until time.Time) ([]string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if len(jobs) == 0 {
		return nil, nil
	}
	ids, leases := jobKeys(jobs)
	untilAt, untilOffset := s.leaseAt(until)
	rows, err := s.pool.Query(ctx, `UPDATE jobs SET leased_until = `+fmt.Sprintf(leaseTime, "$1", "$4")+`
		FROM unnest($2::text[], $3::text[]) AS t (id, lease_id)
		WHERE jobs.id = t.id AND jobs.lease_id = t.lease_id RETURNING jobs.id`, untilAt, ids, leases, untilOffset)
	if err != nil {
		return nil, wrap("renew leases", err)
	}
	renewed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, wrap("renew leases", err)
	}
	kept := make(map[string]bool, len(renewed))
	for _, id := range renewed {
		kept[id] = true
	}
	var lost []string
	for _, j := range jobs {
		if !kept[j.ID] {
			lost = append(lost, j.ID)
		}
	}
	return lost, nil
}

func jobKeys(jobs []storage.Job) (ids, leases []string) {
	ids, leases = make([]string, len(jobs)), make([]string, len(jobs))
	for i, j := range jobs {
		ids[i], leases[i] = j.ID, j.LeaseID
	}
	return ids, leases
}

// RecordOutcomes implements storage.JobStore: the batch in one
// transaction. Each job is locked with its lease checked; each event is
// read once, locked, and written once with every attempt of the batch.
func (s *Store) RecordOutcomes(ctx context.Context, outcomes []storage.Outcome) ([]storage.Recorded, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rec := make([]storage.Recorded, len(outcomes))
	requeued := false
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		clear(rec)
		events := map[string]*storage.Event{}
		var order []string
		requeued = false
		for i, o := range outcomes {
			if o.Job.LeaseID == "" {
				rec[i].Err = storage.ErrLeaseLost
				continue
			}
			j, err := scanJob(tx.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = $1 AND lease_id = $2 FOR UPDATE`, o.Job.ID, o.Job.LeaseID))
			if errors.Is(err, pgx.ErrNoRows) {
				rec[i].Err = storage.ErrLeaseLost
				continue
			}
			if err != nil {
				return err
			}
			if o.Next == storage.EventPending {
				_, err = tx.Exec(ctx, `UPDATE jobs SET owner = '', replica_id = NULL, lease_id = NULL, leased_until = NULL, attempts = attempts + 1, due = $2 WHERE id = $1`,
					j.ID, storage.Timestamp(o.RetryAt))
				requeued = true
			} else {
				_, err = tx.Exec(ctx, `DELETE FROM jobs WHERE id = $1`, j.ID)
			}
			if err != nil {
				return err
			}
			ev := events[j.EventID]
			if ev == nil {
				ev, err = scanEvent(tx.QueryRow(ctx, `SELECT `+eventSelect+` FROM events WHERE id = $1 FOR UPDATE`, j.EventID))
				if errors.Is(err, pgx.ErrNoRows) {
					continue // the event is gone; nothing to record
				}
				if err != nil {
					return err
				}
				events[ev.ID] = ev
				order = append(order, ev.ID)
			}
			ev.RecordAttempt(j, o.Attempt, o.Next)
			cp := *ev
			cp.Targets, cp.Attempts = slices.Clone(ev.Targets), slices.Clone(ev.Attempts)
			rec[i].Event = &cp
		}
		for _, id := range order {
			if err := updateEvent(ctx, tx, events[id]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("record outcomes", err)
	}
	if requeued {
		s.queued()
	}
	return rec, nil
}

// ReleaseJobs implements storage.JobStore.
func (s *Store) ReleaseJobs(ctx context.Context, jobs []storage.Job) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if len(jobs) == 0 {
		return nil
	}
	ids, leases := jobKeys(jobs)
	released := false
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE jobs SET owner = '', replica_id = NULL, lease_id = NULL, leased_until = NULL
			FROM unnest($1::text[], $2::text[]) AS t (id, lease_id)
			WHERE jobs.id = t.id AND jobs.lease_id = t.lease_id`, ids, leases)
		released = err == nil && tag.RowsAffected() > 0
		return err
	})
	if err != nil {
		return wrap("release jobs", err)
	}
	if released {
		s.queued()
	}
	return nil
}

// ReclaimExpired implements storage.JobStore. A lease whose outcome is
// being recorded is locked by that transaction and skipped; when it
// commits the job is no longer leased. Expiry is judged at now on the
// leases' clock (leaseAt); the due time a reclaimed job gets is now on the
// caller's, as due times are.
func (s *Store) ReclaimExpired(ctx context.Context, now time.Time) (int, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var n int64
	at, offset := s.leaseAt(now)
	err := s.tx(ctx, readCommitted, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE jobs SET owner = '', replica_id = NULL, lease_id = NULL, leased_until = NULL, due = LEAST(due, $1)
			WHERE id IN (SELECT id FROM jobs WHERE lease_id IS NOT NULL AND leased_until <= `+fmt.Sprintf(leaseTime, "$2", "$3")+`
				FOR UPDATE SKIP LOCKED)`, storage.Timestamp(now), at, offset)
		if err != nil {
			return err
		}
		n = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return 0, wrap("reclaim expired", err)
	}
	if n > 0 {
		s.queued()
	}
	return int(n), nil
}

// JobStats implements storage.JobStore.
func (s *Store) JobStats(ctx context.Context) (storage.JobStats, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var st storage.JobStats
	var oldest *time.Time
	err := s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE lease_id IS NULL), count(*) FILTER (WHERE lease_id IS NOT NULL),
		min(due) FILTER (WHERE lease_id IS NULL) FROM jobs`).Scan(&st.Pending, &st.Leased, &oldest)
	if err != nil {
		return storage.JobStats{}, wrap("job stats", err)
	}
	st.OldestDue = orZero(oldest)
	return st, nil
}

// ListJobs implements storage.JobStore.
func (s *Store) ListJobs(ctx context.Context) (pending, leased []storage.Job, err error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	err = s.tx(ctx, readOnly, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+jobCols+` FROM jobs WHERE lease_id IS NULL ORDER BY endpoint_id, due, id`)
		if err != nil {
			return err
		}
		if pending, err = collect(rows, scanJob); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT `+jobCols+` FROM jobs WHERE lease_id IS NOT NULL ORDER BY id`)
		if err != nil {
			return err
		}
		leased, err = collect(rows, scanJob)
		return err
	})
	if err != nil {
		return nil, nil, wrap("list jobs", err)
	}
	return pending, leased, nil
}

// WatchJobs implements storage.JobStore: commits of this process and, by
// LISTEN, of every other process sharing the database.
func (s *Store) WatchJobs() (<-chan struct{}, func()) { return s.watch.Watch() }

// queued wakes this process's queues at once and, through the notifier,
// the other processes': called after a commit that made jobs pending.
func (s *Store) queued() {
	s.watch.Notify()
	select {
	case s.wake <- struct{}{}:
	default: // a NOTIFY is on its way already
	}
}

// notifier sends the wake-ups queued asks for, one NOTIFY for however many
// commits came while the last one was being sent, outside any
// transaction (a NOTIFY inside one serializes commits database-wide),
// until ctx ends.
func (s *Store) notifier(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := s.pool.Exec(nctx, `SELECT pg_notify($1, '')`, s.channel); err != nil && ctx.Err() == nil {
			s.log.Warn("postgres: waking the other replicas failed; they will poll", "error", fmt.Sprint(safeErr(err)))
		}
		cancel()
	}
}

// listen holds a connection of its own, outside the pool, that LISTENs for
// job wake-ups and passes them to the watchers, reconnecting after a
// failure, until ctx ends.
func (s *Store) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := func() error {
			conn, err := s.listenConn(ctx)
			if err != nil {
				return err
			}
			defer conn.Close(context.Background())
			// Commits made while the listener was away are not lost: the
			// queue polls too, and a wake-up now makes it look at once.
			s.watch.Notify()
			for {
				if _, err := conn.WaitForNotification(ctx); err != nil {
					return err
				}
				s.watch.Notify()
			}
		}()
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("postgres: job wake-ups interrupted; reconnecting", "error", fmt.Sprint(safeErr(err)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// listenConn connects, within the call's bound, and LISTENs for job
// wake-ups. While it waits for them the connection is idle: the
// keepalives (Options.NetworkTimeout) are what notice a server gone
// silent.
func (s *Store) listenConn(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, s.listenCfg)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{s.channel}.Sanitize()); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}
