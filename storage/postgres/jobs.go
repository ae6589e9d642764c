package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rxgate/rxgate/storage"
)

// A claim locks, FOR UPDATE SKIP LOCKED, the claim slots (claim_slots,
// one row per endpoint) of the endpoints it has due jobs for; there is no
// lock that every claim takes. A slot row is its endpoint's claim lock:
// the claims of one endpoint take turns, and each, holding the row,
// counts the endpoint's leases in a statement that starts after it got
// the row, so it sees every lease the claim before it committed (a commit
// is visible before its locks are released) and the per-endpoint limit
// holds across replicas. Claims of other endpoints go on beside it, and
// a claim that finds an endpoint's slot held skips that endpoint rather
// than wait (claimSkipRetry). Leases end (outcomes, releases, reclaims)
// without the slot: an end only makes room, so a claim that misses it
// stays under the limit. Nor does a handoff take the slot: it leases no
// more of an endpoint's jobs than its outcomes ended leases, which leaves
// the count a claim made under the slot as it was (RecordOutcomesHandoff).
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

// claimSkipRetry bounds a claim's NextDue when it skipped an endpoint
// with due jobs whose slot another claim held: that claim may stop at its
// Max and leave jobs due, so this one's queue looks again soon, without
// spinning on the slot while it is held.
const claimSkipRetry = 20 * time.Millisecond

// claimEndpointsSQL walks the endpoints that have pending jobs with a
// loose index scan of jobs_pending (one probe per endpoint, however long
// its backlog) and gives each one's first due time and leases; it locks
// the slots of those with a job due by $1, skipping the slots another
// claim holds (locked is false for those and for the endpoints with
// nothing due), and tells whether the slot exists. A disabled endpoint's
// jobs are held: it is left out. Nor is the slot of an endpoint that had
// its limit ($2) of leases at the statement's start locked (the claiming
// owner's finished jobs, $3, uncounted: storage.ClaimRequest.Finished;
// leased is the count without them): it may take
// nothing, and a lease ended since only makes room a later claim sees;
// its slot stays free for the outcomes that hand their places on
// (RecordOutcomesHandoff), which a claim holding it would make skip it.
const claimEndpointsSQL = `
	WITH RECURSIVE eps (endpoint_id) AS (
		(SELECT endpoint_id FROM jobs WHERE lease_id IS NULL ORDER BY endpoint_id LIMIT 1)
		UNION ALL
		SELECT (SELECT j.endpoint_id FROM jobs j WHERE j.lease_id IS NULL AND j.endpoint_id > eps.endpoint_id
			ORDER BY j.endpoint_id LIMIT 1)
		FROM eps WHERE eps.endpoint_id IS NOT NULL)
	SELECT e.endpoint_id, h.due, l.leased,
		s.endpoint_id IS NOT NULL,
		EXISTS (SELECT 1 FROM claim_slots c WHERE c.endpoint_id = e.endpoint_id)
	FROM eps e
	CROSS JOIN LATERAL (
		SELECT due FROM jobs WHERE endpoint_id = e.endpoint_id AND lease_id IS NULL ORDER BY due, id LIMIT 1) h
	CROSS JOIN LATERAL (
		SELECT count(*)::int AS leased FROM jobs l WHERE l.endpoint_id = e.endpoint_id AND l.lease_id IS NOT NULL
			AND NOT (l.id = ANY($3::text[]))) l
	LEFT JOIN LATERAL (
		SELECT c.endpoint_id FROM claim_slots c WHERE c.endpoint_id = e.endpoint_id AND h.due <= $1
			AND ($2::int <= 0 OR l.leased < $2::int)
		FOR UPDATE SKIP LOCKED) s ON true
	WHERE e.endpoint_id IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.id = e.endpoint_id AND w.disabled_at IS NOT NULL)
	ORDER BY e.endpoint_id`

// claimHeadsSQL reads, for the endpoints whose slots the claim holds
// ($1), the leases and the first pending jobs in due order: as many as
// the allowance (storage.ClaimRequest.Allowance, PerEndpoint $2, Max $3,
// of the leases less the claiming owner's finished jobs $4, which are
// counted only while still leased: an id whose outcome was recorded since
// the owner listed it is neither leased nor uncounted) and one more,
// whose due time is the head's Next. No row lock: with
// the slot held no other claim takes these jobs, and the UPDATE that
// leases them locks only those it takes (a handoff may lease one
// meanwhile: the UPDATE re-checks, and the claim gets one fewer).
const claimHeadsSQL = `
	SELECT l.endpoint_id, l.leased, j.id, j.due
	FROM (SELECT e.endpoint_id,
			(SELECT count(*) FROM jobs x WHERE x.endpoint_id = e.endpoint_id AND x.lease_id IS NOT NULL
				AND NOT (x.id = ANY($4::text[])))::int AS leased
		FROM unnest($1::text[]) AS e (endpoint_id)) l
	CROSS JOIN LATERAL (
		SELECT id, due FROM jobs
		WHERE endpoint_id = l.endpoint_id AND lease_id IS NULL
		ORDER BY due, id
		LIMIT (CASE WHEN $2::int <= 0 THEN $3::int ELSE greatest(0, least($3::int, $2::int - l.leased)) END) + 1) j
	ORDER BY l.endpoint_id, j.due, j.id`

// ClaimJobs implements storage.JobStore with storage.PlanClaim, in one
// pipelined transaction of three round trips: BEGIN and the slots
// (claimEndpointsSQL); the heads of the endpoints whose slots it holds
// (claimHeadsSQL); the leases, read back with the events' payloads and
// the endpoints, and COMMIT. Endpoints whose first job is not due yet are
// not locked: their heads give NextDue only, from the first statement's
// counts.
func (s *Store) ClaimJobs(ctx context.Context, req storage.ClaimRequest) (storage.ClaimResult, error) {
	ctx, cancel := boundBy(ctx, s.claimTimeout)
	defer cancel()
	var res storage.ClaimResult
	untilAt, untilOffset := s.leaseAt(req.Now.Add(req.LeaseFor))
	req.Now = storage.Timestamp(req.Now)
	type endpoint struct {
		id           string
		due          time.Time
		leased       int
		locked, slot bool
	}
	err := s.pipe(ctx, beginReadCommitted, func(p *pipeTx) error {
		res = storage.ClaimResult{}
		var eps []endpoint
		var locked, missing []string
		skipped := false
		finished := finishedIDs(req.Finished)
		b := p.batch()
		b.Queue(claimEndpointsSQL, req.Now, int32(req.PerEndpoint), finished).Query(func(rows pgx.Rows) error {
			var e endpoint
			_, err := pgx.ForEachRow(rows, []any{&e.id, &e.due, &e.leased, &e.locked, &e.slot}, func() error {
				e.due = utc(e.due)
				eps = append(eps, e)
				switch {
				case !e.locked && req.Allowance(e.leased) <= 0:
					// At its limit: nothing to take, nothing to look
					// at again before a lease ends.
				case e.locked:
					locked = append(locked, e.id)
				case !e.slot:
					missing = append(missing, e.id)
					skipped = true
				case !e.due.After(req.Now):
					skipped = true // due, but another claim holds the slot
				}
				return nil
			})
			return err
		})
		if err := p.send(ctx, b); err != nil {
			return err
		}
		heads := map[string]*storage.ClaimHead[string]{}
		if len(locked) > 0 {
			b = p.batch()
			b.Queue(claimHeadsSQL, locked, int32(req.PerEndpoint), int32(req.Max), finished).Query(func(rows pgx.Rows) error {
				var endpoint, id string
				var leased int
				var due time.Time
				_, err := pgx.ForEachRow(rows, []any{&endpoint, &leased, &id, &due}, func() error {
					h := heads[endpoint]
					if h == nil {
						h = &storage.ClaimHead[string]{Endpoint: endpoint, Allow: req.Allowance(leased)}
						heads[endpoint] = h
					}
					if h.Takes(utc(due), req.Now) {
						h.Due = append(h.Due, id)
					}
					return nil
				})
				return err
			})
			if err := p.send(ctx, b); err != nil {
				return err
			}
		}
		var all []storage.ClaimHead[string]
		for _, e := range eps {
			switch h := heads[e.id]; {
			case h != nil:
				all = append(all, *h)
			case !e.locked && e.due.After(req.Now):
				// Nothing due: the head tells NextDue only.
				nd := storage.ClaimHead[string]{Endpoint: e.id, Allow: req.Allowance(e.leased)}
				nd.Takes(e.due, req.Now)
				all = append(all, nd)
			}
		}
		plan := storage.PlanClaim(req, all)
		res.NextDue = plan.NextDue
		if skipped {
			if retry := req.Now.Add(claimSkipRetry); res.NextDue.IsZero() || retry.Before(res.NextDue) {
				res.NextDue = retry
			}
		}
		b = p.batch()
		if len(missing) > 0 {
			// Jobs without their slot: no write of this build makes
			// them (insertJobsSQL writes the slot with the jobs, and
			// builds older than claim_slots refuse this schema), but a
			// table restored or edited by hand could, and they must
			// not wait forever. The next claim finds the slot.
			b.Queue(`INSERT INTO claim_slots (endpoint_id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING`, missing)
		}
		if len(plan.Jobs) > 0 {
			leaseIDs := make([]string, len(plan.Jobs))
			for i := range leaseIDs {
				leaseIDs[i] = storage.NewID()
			}
			b.Queue(claimLeaseSQL, req.Owner, untilAt, plan.Jobs, leaseIDs, untilOffset, s.replicaID()).Query(func(rows pgx.Rows) error {
				var err error
				res.Jobs, err = claimedJobs(rows)
				return err
			})
		}
		return p.commit(ctx, b)
	})
	if err != nil {
		return storage.ClaimResult{}, wrap("claim jobs", err)
	}
	return res, nil
}

// claimLeaseSQL leases the jobs a claim took ($3, with their lease ids
// $4), locking those rows only, and reads them back in that order with
// their events' payloads and their endpoints (claimedJobs). The ANY
// beside the join keeps the plan on the primary key: joined to the unnest
// alone, the planner hashed every pending job. A job that
// is gone or leased since the heads were read (a handoff, which takes no
// slot, may have leased it) is not returned.
var claimLeaseSQL = leaseSQL("")

// leaseSQL is claimLeaseSQL with one more condition on the jobs leased.
func leaseSQL(cond string) string {
	return `
	WITH t AS (SELECT * FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS t (id, lease_id, n)),
	u AS (
		UPDATE jobs SET owner = $1, replica_id = $6, lease_id = t.lease_id, leased_until = ` + fmt.Sprintf(leaseTime, "$2", "$5") + `
		FROM t WHERE jobs.id = t.id AND jobs.id = ANY($3::text[]) AND jobs.lease_id IS NULL` + cond + `
		RETURNING jobs.id, jobs.event_id, jobs.endpoint_id, jobs.round, jobs.attempts, jobs.due, jobs.owner, jobs.lease_id, jobs.leased_until, t.n)
	SELECT u.id, u.event_id, u.endpoint_id, u.round, u.attempts, u.due, u.owner, u.lease_id, u.leased_until,
		e.payload, w.id, w.partner_id, w.url, w.secret, w.previous_secret, w.previous_until, w.created_at, w.rotated_at, w.signature_scheme
	FROM u
	LEFT JOIN events e ON e.id = u.event_id
	LEFT JOIN webhook_endpoints w ON w.id = u.endpoint_id
	ORDER BY u.n`
}

// claimedJobs reads the jobs claimLeaseSQL leased.
func claimedJobs(rows pgx.Rows) ([]storage.ClaimedJob, error) {
	defer rows.Close()
	var out []storage.ClaimedJob
	for rows.Next() {
		var c storage.ClaimedJob
		var round, attempts int32
		var leaseID *string
		var leasedUntil *time.Time
		var wID, wPartner, wURL, wSecret, wPrevious, wScheme *string
		var wUntil, wCreated, wRotated *time.Time
		if err := rows.Scan(&c.ID, &c.EventID, &c.EndpointID, &round, &attempts, &c.Due, &c.Owner, &leaseID, &leasedUntil,
			&c.Payload, &wID, &wPartner, &wURL, &wSecret, &wPrevious, &wUntil, &wCreated, &wRotated, &wScheme); err != nil {
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
				SignatureScheme: *wScheme,
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
		WHERE jobs.id = t.id AND jobs.id = ANY($2::text[]) AND jobs.lease_id = t.lease_id RETURNING jobs.id`, untilAt, ids, leases, untilOffset)
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

// recordLockSQL locks the jobs of a batch of outcomes ($1, $2: ids and
// the leases presented) that still hold those leases, and their events,
// and reads them: in the order of event and job ids, which is the order
// the rows are locked in, so two batches sharing events do not deadlock.
const recordLockSQL = `SELECT j.id, j.event_id, j.endpoint_id, j.round, j.attempts, j.due, j.owner, j.lease_id, j.leased_until,
		e.id, e.type, COALESCE(e.org_id, ''), e.partner_id, e.created_at, e.payload, e.status, e.skip_reason, e.round, e.targets, e.attempts
	FROM unnest($1::text[], $2::text[]) AS t (id, lease_id)
	JOIN jobs j ON j.id = t.id AND j.lease_id = t.lease_id
	JOIN events e ON e.id = j.event_id
	WHERE j.id = ANY($1::text[])
	ORDER BY e.id, j.id
	FOR UPDATE OF j, e`

// RecordOutcomes implements storage.JobStore: the batch in one pipelined
// transaction of two round trips, however many outcomes. The first locks
// and reads every job still holding its lease, with its event
// (recordLockSQL); the attempts are recorded on the events here; the
// second deletes the finished jobs, puts the retried ones back, writes
// each event once, set-based, and commits.
func (s *Store) RecordOutcomes(ctx context.Context, outcomes []storage.Outcome) ([]storage.Recorded, error) {
	rec, _, err := s.recordOutcomes(ctx, outcomes, nil)
	return rec, err
}

// RecordOutcomesHandoff implements storage.JobHandoff: RecordOutcomes'
// two round trips, with the handoff in them. The first also reads, for
// each of the batch's endpoints, its leases and its first due pending
// jobs, locking those jobs FOR UPDATE SKIP LOCKED (handoffHeadsSQL); the
// second, after the batch's writes, leases the jobs picked.
//
// It takes no claim slot: an endpoint gets at most as many jobs as the
// batch ended of its leases, so its count of leases does not grow, and
// the per-endpoint limit a claim counts under the slot holds whatever
// the handoffs beside it do. A claim holding the slot counted the ended
// leases as leased (they were, until this commits) and not the handed
// ones (not yet leased), so the two together stay within its count; a
// claim after this commit counts the handed leases in place of the ended
// ones. The ended leases' places must not also be given away by a claim
// that uncounts them (storage.ClaimRequest.Finished): a queue that hands
// off does not list them (queue.go). Handoffs of the same endpoint run
// side by side, each with the jobs it locked; a claim whose planned job
// a handoff took finds it leased when its UPDATE re-checks, and takes
// one fewer.
func (s *Store) RecordOutcomesHandoff(ctx context.Context, outcomes []storage.Outcome, next storage.ClaimRequest) ([]storage.Recorded, []storage.ClaimedJob, error) {
	if next.Max <= 0 {
		rec, err := s.RecordOutcomes(ctx, outcomes)
		return rec, nil, err
	}
	return s.recordOutcomes(ctx, outcomes, &next)
}

// handoffHeadsSQL reads, for the endpoints $1, each one's leases (this
// transaction's, which its outcomes end, among them) and its first $2
// pending jobs due by $3, in due order, locking them FOR UPDATE SKIP
// LOCKED: jobs another handoff or a claim's UPDATE is leasing are passed
// over, so that handoffs side by side take different jobs and none waits.
const handoffHeadsSQL = `
	SELECT e.endpoint_id,
		(SELECT count(*) FROM jobs x WHERE x.endpoint_id = e.endpoint_id AND x.lease_id IS NOT NULL)::int,
		j.id, j.due
	FROM unnest($1::text[], $2::int[]) AS e (endpoint_id, n)
	LEFT JOIN LATERAL (
		SELECT id, due FROM jobs
		WHERE endpoint_id = e.endpoint_id AND lease_id IS NULL AND due <= $3
		ORDER BY due, id LIMIT e.n
		FOR UPDATE SKIP LOCKED) j ON true
	ORDER BY e.endpoint_id, j.due, j.id`

// handoffLeaseSQL is claimLeaseSQL but for the jobs of a disabled
// endpoint: it runs after the batch's health changes, which may have
// disabled one.
var handoffLeaseSQL = leaseSQL(`
		AND NOT EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.id = jobs.endpoint_id AND w.disabled_at IS NOT NULL)`)

// recordOutcomes is RecordOutcomes, and with next the handoff
// (RecordOutcomesHandoff).
func (s *Store) recordOutcomes(ctx context.Context, outcomes []storage.Outcome, next *storage.ClaimRequest) ([]storage.Recorded, []storage.ClaimedJob, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	rec := make([]storage.Recorded, len(outcomes))
	ids, leases := make([]string, 0, len(outcomes)), make([]string, 0, len(outcomes))
	for _, o := range outcomes {
		if o.Job.LeaseID != "" {
			ids, leases = append(ids, o.Job.ID), append(leases, o.Job.LeaseID)
		}
	}
	// The batch's endpoints, for the handoff, with how many of its
	// outcomes each has: the most leases it can end there.
	var slots []string
	var presented []int32
	var untilAt *time.Time
	var untilOffset time.Duration
	if next != nil {
		n := map[string]int32{}
		for _, o := range outcomes {
			if o.Job.LeaseID != "" {
				if n[o.Job.EndpointID] == 0 {
					slots = append(slots, o.Job.EndpointID)
				}
				n[o.Job.EndpointID]++
			}
		}
		slices.Sort(slots)
		for _, e := range slots {
			presented = append(presented, n[e])
		}
		untilAt, untilOffset = s.leaseAt(next.Now.Add(next.LeaseFor))
	}
	now := time.Time{}
	if next != nil {
		now = storage.Timestamp(next.Now)
	}
	requeued := false
	var handed []storage.ClaimedJob
	err := s.pipe(ctx, beginReadCommitted, func(p *pipeTx) error {
		clear(rec)
		requeued, handed = false, nil
		type head struct {
			leased int
			ids    []string
			dues   []time.Time
		}
		heads := map[string]*head{}
		jobs := map[string]*storage.Job{}
		events := map[string]*storage.Event{}
		var order []string // events, in the order they were read
		b := p.batch()
		if len(ids) > 0 {
			b.Queue(recordLockSQL, ids, leases).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var j storage.Job
					var e storage.Event
					var round, attempts int32
					var leaseID *string
					var until *time.Time
					var targets, tried []byte
					if err := rows.Scan(&j.ID, &j.EventID, &j.EndpointID, &round, &attempts, &j.Due, &j.Owner, &leaseID, &until,
						&e.ID, &e.Type, &e.OrganizationID, &e.PartnerID, &e.CreatedAt, &e.Payload, &e.Status, &e.SkipReason, &e.Round, &targets, &tried); err != nil {
						return err
					}
					j.Round, j.Attempts, j.Due, j.LeasedUntil = int(round), int(attempts), utc(j.Due), orZero(until)
					if leaseID != nil {
						j.LeaseID = *leaseID
					}
					jobs[j.ID] = &j
					if events[e.ID] != nil {
						continue
					}
					if err := json.Unmarshal(targets, &e.Targets); err != nil {
						return fmt.Errorf("storage: decode event targets: %w", err)
					}
					if err := json.Unmarshal(tried, &e.Attempts); err != nil {
						return fmt.Errorf("storage: decode event attempts: %w", err)
					}
					e.CreatedAt = utc(e.CreatedAt)
					events[e.ID] = &e
					order = append(order, e.ID)
				}
				return rows.Err()
			})
		}
		if len(slots) > 0 {
			b.Queue(handoffHeadsSQL, slots, presented, now).Query(func(rows pgx.Rows) error {
				var endpoint string
				var leased int
				var id *string
				var due *time.Time
				_, err := pgx.ForEachRow(rows, []any{&endpoint, &leased, &id, &due}, func() error {
					h := heads[endpoint]
					if h == nil {
						h = &head{leased: leased}
						heads[endpoint] = h
					}
					if id != nil {
						h.ids, h.dues = append(h.ids, *id), append(h.dues, utc(*due))
					}
					return nil
				})
				return err
			})
		}
		if err := p.send(ctx, b); err != nil {
			return err
		}
		var done, retried []string
		freed := map[string]int32{} // leases ended, by endpoint
		var retryAt []time.Time
		for i, o := range outcomes {
			j := jobs[o.Job.ID]
			if j == nil || o.Job.LeaseID == "" || j.LeaseID != o.Job.LeaseID {
				rec[i].Err = storage.ErrLeaseLost
				continue
			}
			delete(jobs, j.ID) // a second outcome of the job finds its lease gone
			freed[j.EndpointID]++
			if o.Next == storage.EventPending {
				retried, retryAt = append(retried, j.ID), append(retryAt, storage.Timestamp(o.RetryAt))
				requeued = true
			} else {
				done = append(done, j.ID)
			}
			ev := events[j.EventID]
			ev.RecordAttempt(j, o.Attempt, o.Next)
			cp := *ev
			cp.Targets, cp.Attempts = slices.Clone(ev.Targets), slices.Clone(ev.Attempts)
			rec[i].Event = &cp
		}
		b = p.batch()
		if len(done) > 0 {
			b.Queue(`DELETE FROM jobs WHERE id = ANY($1::text[])`, done)
		}
		if len(retried) > 0 {
			b.Queue(`UPDATE jobs SET owner = '', replica_id = NULL, lease_id = NULL, leased_until = NULL, attempts = attempts + 1, due = t.due
				FROM unnest($1::text[], $2::timestamptz[]) AS t (id, due) WHERE jobs.id = t.id AND jobs.id = ANY($1::text[])`, retried, retryAt)
		}
		var health []storage.HealthChange
		if len(ids) > 0 {
			health = storage.HealthChanges(outcomes, func(i int) bool { return rec[i].Err == nil })
		}
		if len(health) > 0 {
			queueHealth(b, health, outcomes, rec)
		}
		if len(order) > 0 {
			n := len(order)
			statuses, skips, rounds := make([]string, n), make([]string, n), make([]int32, n)
			targets, attempts := make([][]byte, n), make([][]byte, n)
			for i, id := range order {
				ev := events[id]
				var err error
				if targets[i], attempts[i], err = eventLists(ev); err != nil {
					return err
				}
				statuses[i], skips[i], rounds[i] = ev.Status, ev.SkipReason, int32(ev.Round)
			}
			b.Queue(`UPDATE events SET status = t.status, skip_reason = t.skip_reason, round = t.round, targets = t.targets, attempts = t.attempts
				FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::bytea[], $6::bytea[])
					AS t (id, status, skip_reason, round, targets, attempts)
				WHERE events.id = t.id AND events.id = ANY($1::text[])`, order, statuses, skips, rounds, targets, attempts)
		}
		var pick []storage.ClaimHead[string]
		for _, e := range slots {
			h := heads[e]
			if freed[e] == 0 || h == nil {
				continue
			}
			// At most one job per lease the batch ended (the endpoint's
			// leases do not grow), and within the limit counting the
			// leases left once the batch's end.
			c := storage.ClaimHead[string]{Endpoint: e, Allow: min(int(freed[e]), next.Allowance(h.leased-int(freed[e])))}
			for k, id := range h.ids {
				if !c.Takes(h.dues[k], now) {
					break
				}
				c.Due = append(c.Due, id)
			}
			pick = append(pick, c)
		}
		if len(pick) == 0 {
			return p.commit(ctx, b)
		}
		if plan := storage.PlanClaim(storage.ClaimRequest{Now: now, Max: next.Max, PerEndpoint: next.PerEndpoint}, pick); len(plan.Jobs) > 0 {
			// After the batch's writes: an endpoint the batch disabled
			// gets none.
			leaseIDs := make([]string, len(plan.Jobs))
			for i := range leaseIDs {
				leaseIDs[i] = storage.NewID()
			}
			b.Queue(handoffLeaseSQL, next.Owner, untilAt, plan.Jobs, leaseIDs, untilOffset, s.replicaID()).Query(func(rows pgx.Rows) error {
				var err error
				handed, err = claimedJobs(rows)
				return err
			})
		}
		return p.commit(ctx, b)
	})
	if err != nil {
		return nil, nil, wrap("record outcomes", err)
	}
	if requeued {
		s.queued()
	}
	return rec, handed, nil
}

// recordHealthSQL applies a batch's storage.HealthChanges (ids $1, reset
// $2, since $3, last $4, disable after in microseconds $5) as
// WebhookEndpoint.ApplyHealth does, writing only the endpoints whose
// streak starts, moves or ends or that it disables ($6 the reason), and
// reads back those it disabled.
var recordHealthSQL = func() string {
	streak := `(CASE WHEN t.reset THEN t.since ELSE COALESCE(w.failing_since, t.since) END)`
	disable := `(w.disabled_at IS NULL AND t.since IS NOT NULL AND t.after_us > 0
		AND t.last >= ` + streak + ` + t.after_us * interval '1 microsecond')`
	return `UPDATE webhook_endpoints w SET
			failing_since = CASE WHEN t.since IS NULL THEN NULL ELSE ` + streak + ` END,
			disabled_at = CASE WHEN ` + disable + ` THEN t.last ELSE w.disabled_at END,
			disabled_reason = CASE WHEN ` + disable + ` THEN $6 ELSE w.disabled_reason END
		FROM unnest($1::text[], $2::bool[], $3::timestamptz[], $4::timestamptz[], $5::bigint[]) AS t (id, reset, since, last, after_us)
		WHERE w.id = t.id AND w.id = ANY($1::text[]) AND (
			(t.since IS NULL AND w.failing_since IS NOT NULL)
			OR (t.since IS NOT NULL AND (w.failing_since IS NULL OR (t.reset AND w.failing_since <> t.since) OR ` + disable + `)))
		RETURNING w.id, w.partner_id, w.url, w.secret, w.previous_secret, w.previous_until, w.created_at, w.rotated_at, w.signature_scheme,
			w.failing_since, w.disabled_at, w.disabled_reason, w.disabled_at IS NOT NULL AND w.disabled_at = t.last AND w.disabled_reason = $6`
}()

// queueHealth queues recordHealthSQL for the batch's changes; the
// endpoints it disabled are put on the first recorded outcome of each.
func queueHealth(b *pgx.Batch, health []storage.HealthChange, outcomes []storage.Outcome, rec []storage.Recorded) {
	n := len(health)
	ids, resets, after := make([]string, n), make([]bool, n), make([]int64, n)
	since, last := make([]*time.Time, n), make([]*time.Time, n)
	for i, c := range health {
		ids[i], resets[i] = c.Endpoint, c.Reset
		if c.DisableAfter > 0 {
			// Rounded up to the column's microseconds: a period under one
			// is not "off" (0).
			after[i] = (c.DisableAfter + time.Microsecond - 1).Microseconds()
		}
		if !c.Since.IsZero() {
			since[i], last[i] = &c.Since, &c.Last
		}
	}
	b.Queue(recordHealthSQL, ids, resets, since, last, after, storage.ReasonFailing).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var e storage.WebhookEndpoint
			var until *time.Time
			var disabled bool
			if err := rows.Scan(&e.ID, &e.PartnerID, &e.URL, &e.Secret, &e.PreviousSecret, &until, &e.CreatedAt, &e.RotatedAt, &e.SignatureScheme,
				&e.FailingSince, &e.DisabledAt, &e.DisabledReason, &disabled); err != nil {
				return err
			}
			if !disabled {
				continue
			}
			e.PreviousUntil, e.CreatedAt, e.RotatedAt = orZero(until), utc(e.CreatedAt), utcp(e.RotatedAt)
			e.FailingSince, e.DisabledAt = utcp(e.FailingSince), utcp(e.DisabledAt)
			for i := range outcomes {
				if rec[i].Err == nil && outcomes[i].Job.EndpointID == e.ID {
					rec[i].Disabled = &e
					break
				}
			}
		}
		return rows.Err()
	})
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
			WHERE jobs.id = t.id AND jobs.id = ANY($1::text[]) AND jobs.lease_id = t.lease_id`, ids, leases)
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
// until ctx ends. This process's own queues are woken at once (queued);
// of the others, one is woken (wakeTargets), not all: every one woken
// runs a claim, and most would find the jobs taken.
func (s *Store) notifier(ctx context.Context) {
	var w wakeTargets
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := s.notify(nctx, w.next(nctx, s)); err != nil && ctx.Err() == nil {
			s.log.Warn("postgres: waking the other replicas failed; they will poll", "error", fmt.Sprint(safeErr(err)))
		}
		cancel()
	}
}

// notify sends one NOTIFY with payload, from a pooled connection whose
// backend this process's listener then knows for its own (ownSender):
// PostgreSQL delivers a NOTIFY to every listener, the sender's own
// process's too, whose queues queued woke already. Without that, every
// commit that made jobs pending woke this process's queues twice, and
// each wake-up is a claim.
func (s *Store) notify(ctx context.Context, payload string) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	s.senders.add(c.Conn().PgConn().PID())
	_, err = c.Exec(ctx, `SELECT pg_notify($1, $2)`, s.channel, payload)
	return err
}

// senderPIDs are the backend process ids of the connections this
// process's notifier sent NOTIFYs from, as many as its pool holds at
// most: a listener skips those it sent itself. A backend id another
// process's connection reuses later is skipped too: that process's queues
// then find the jobs by polling, as after a lost NOTIFY.
type senderPIDs struct {
	mu   sync.Mutex
	pids []uint32 // the most recent last
	max  int
}

func (p *senderPIDs) add(pid uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.pids, pid); i >= 0 {
		p.pids = slices.Delete(p.pids, i, i+1)
	}
	p.pids = append(p.pids, pid)
	if len(p.pids) > p.max {
		p.pids = slices.Delete(p.pids, 0, len(p.pids)-p.max)
	}
}

func (p *senderPIDs) has(pid uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.pids, pid)
}

// wakeRefresh is how often the notifier reads which replicas are alive.
const wakeRefresh = time.Second

// wakeTargets chooses whom a NOTIFY wakes: the other live replicas
// (replicas table) in turn, by their ids in the payload. The payload is
// empty, which wakes every listener, from an anonymous store, when no
// other replica is known, or when the replicas cannot be read; an
// anonymous store's listener wakes on every payload (wakes).
type wakeTargets struct {
	ids  []string
	at   time.Time
	turn int
}

func (w *wakeTargets) next(ctx context.Context, s *Store) string {
	if s.replica == nil {
		return ""
	}
	if time.Since(w.at) >= wakeRefresh {
		w.at = time.Now()
		w.ids = nil
		rows, err := s.pool.Query(ctx, `SELECT replica_id FROM replicas
			WHERE replica_id <> $1 AND last_seen > now() - $2::interval ORDER BY replica_id`, s.replica.id, staleBeats*s.replica.beat)
		if err == nil {
			if ids, err := pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
				w.ids = ids
			}
		}
	}
	if len(w.ids) == 0 {
		return ""
	}
	w.turn = (w.turn + 1) % len(w.ids)
	return w.ids[w.turn]
}

// wakes reports whether a NOTIFY with payload is for this process's
// queues: one for every listener (empty), for this replica, or any for an
// anonymous store.
func (s *Store) wakes(payload string) bool {
	return payload == "" || s.replica == nil || payload == s.replica.id
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
				n, err := conn.WaitForNotification(ctx)
				if err != nil {
					return err
				}
				if s.wakes(n.Payload) && !s.senders.has(n.PID) {
					if f := s.onWake.Load(); f != nil {
						(*f)(n.Payload)
					}
					s.watch.Notify()
				}
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

// finishedIDs is ClaimRequest.Finished as the claim's statements take it:
// every endpoint's ids in one array, never nil (ANY of NULL is NULL).
func finishedIDs(finished map[string][]string) []string {
	ids := []string{}
	for _, e := range finished {
		ids = append(ids, e...)
	}
	return ids
}
