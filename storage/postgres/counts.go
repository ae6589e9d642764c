package postgres

import (
	"context"
	"time"

	"github.com/rxgate/rxgate/storage"
)

// Counts for the metrics (JobStats, at every scrape) and the console's
// overview (Count) cost the same whatever the store's size: each figure
// is counted exactly up to countCap rows, through an index where one
// serves, and a figure that reaches the cap is estimated from the
// database's statistics instead (the table's live rows as the statistics
// collector keeps them, and the status column's frequencies as ANALYZE
// last saw them), never below the cap, and flagged Estimated. An operator
// reading "10,000 or more, about 2 million" needs no exact figure; one
// needing it runs count(*) by hand.

// defaultCountCap is the exact counts' bound.
const defaultCountCap = 10000

// JobStats implements storage.JobStore in one statement: the pending and
// the leased jobs counted up to the cap, and the oldest due time of a
// pending job exact, found by a loose index scan of jobs_pending
// (endpoint_id, due, ...): the first endpoint with a pending job, then
// each next one, and the earliest due time of each, a few index probes
// per endpoint however long the backlog.
func (s *Store) JobStats(ctx context.Context) (storage.JobStats, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var st storage.JobStats
	var oldest *time.Time
	var live int64
	err := s.pool.QueryRow(ctx, `WITH RECURSIVE endpoints AS (
			(SELECT endpoint_id FROM jobs WHERE lease_id IS NULL ORDER BY endpoint_id LIMIT 1)
			UNION ALL
			SELECT (SELECT j.endpoint_id FROM jobs j WHERE j.lease_id IS NULL AND j.endpoint_id > e.endpoint_id
				ORDER BY j.endpoint_id LIMIT 1)
			FROM endpoints e WHERE e.endpoint_id IS NOT NULL)
		SELECT
			(SELECT count(*) FROM (SELECT 1 FROM jobs WHERE lease_id IS NULL LIMIT $1) p),
			(SELECT count(*) FROM (SELECT 1 FROM jobs WHERE lease_id IS NOT NULL LIMIT $1) l),
			(SELECT min((SELECT j.due FROM jobs j WHERE j.lease_id IS NULL AND j.endpoint_id = e.endpoint_id ORDER BY j.due LIMIT 1))
				FROM endpoints e WHERE e.endpoint_id IS NOT NULL),
			coalesce((SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'jobs'::regclass), 0)`,
		s.countCap).Scan(&st.Pending, &st.Leased, &oldest, &live)
	if err != nil {
		return storage.JobStats{}, wrap("job stats", err)
	}
	st.OldestDue = orZero(oldest)
	if st.Leased >= s.countCap {
		st.Leased, st.Estimated = max(st.Leased, int(live)-st.Pending), true
	}
	if st.Pending >= s.countCap {
		st.Pending, st.Estimated = max(st.Pending, int(live)-st.Leased), true
	}
	return st, nil
}

// Count implements storage.Store in one statement (one snapshot): the
// organizations, the users and the events of each status (through
// events_status) counted up to the cap; an event status at the cap is
// estimated from its frequency in the column's statistics, or, before
// ANALYZE has run, from what the other statuses leave of the table's
// live rows.
func (s *Store) Count(ctx context.Context) (storage.Counts, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	statuses := storage.EventStatuses
	var exact []int64
	var orgs, users, orgsLive, usersLive, eventsLive int64
	var mcv []string
	var freqs []float64
	err := s.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM (SELECT 1 FROM organizations LIMIT $1) o),
			(SELECT count(*) FROM (SELECT 1 FROM users LIMIT $1) u),
			ARRAY(SELECT (SELECT count(*) FROM (SELECT 1 FROM events WHERE status = st LIMIT $1) e)
				FROM unnest($2::text[]) WITH ORDINALITY AS t (st, i) ORDER BY i),
			coalesce((SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'organizations'::regclass), 0),
			coalesce((SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'users'::regclass), 0),
			coalesce((SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'events'::regclass), 0),
			(SELECT most_common_vals::text::text[] FROM pg_stats
				WHERE schemaname = current_schema() AND tablename = 'events' AND attname = 'status'),
			(SELECT most_common_freqs FROM pg_stats
				WHERE schemaname = current_schema() AND tablename = 'events' AND attname = 'status')`,
		s.countCap, statuses).Scan(&orgs, &users, &exact, &orgsLive, &usersLive, &eventsLive, &mcv, &freqs)
	if err != nil {
		return storage.Counts{}, wrap("count", err)
	}
	c := storage.Counts{Organizations: int(orgs), Users: int(users), Events: make(map[string]int, len(statuses))}
	capped := func(n, live int64) int {
		if n < int64(s.countCap) {
			return int(n)
		}
		c.Estimated = true
		return int(max(n, live))
	}
	c.Organizations, c.Users = capped(orgs, orgsLive), capped(users, usersLive)
	freq := map[string]float64{}
	for i, v := range mcv {
		if i < len(freqs) {
			freq[v] = freqs[i]
		}
	}
	// What the statuses counted exactly leave of the live rows, shared by
	// those at the cap that the statistics do not know.
	rest, unknown := eventsLive, 0
	for i, st := range statuses {
		if exact[i] < int64(s.countCap) {
			rest -= exact[i]
		} else if _, ok := freq[st]; !ok {
			unknown++
		}
	}
	for i, st := range statuses {
		n := exact[i]
		switch {
		case n < int64(s.countCap):
		case freq[st] > 0:
			n = max(n, int64(freq[st]*float64(eventsLive)))
		default:
			n = max(n, rest/int64(max(unknown, 1)))
		}
		c.Events[st] = capped(n, 0)
	}
	return c, nil
}
