package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

// The job store (storage.JobStore). Every queued job lives on disk at
// jp/{endpoint}/{due}{job}, so each endpoint's due work is one prefix scan
// from its start, until its delivery is done.
//
// What only one process owning the directory allows (Badger locks it) is
// kept in memory, where it costs no disk write:
//
//   - The leases. A lease exists to keep two workers off one job; in one
//     process, memory does that, and a crash voids it just as the crash
//     ends the attempt it guarded, so the job, still pending on disk, is
//     attempted again after the restart (at least once). A claim therefore
//     writes nothing; the attempt's outcome is the job's one write.
//   - How many jobs each endpoint has leased, for the claim's limit.
//   - Where each endpoint's pending jobs begin (low, below). A finished
//     job's key is deleted, and Badger keeps a deletion marker that every
//     scan from the start of the endpoint's range must step over until
//     compaction drops it; under sustained load the markers outnumber the
//     live jobs by far, and a scan from the start costs as much as the
//     endpoint's whole history. So a claim starts each endpoint's scan at
//     the earliest job the last claim left pending. Every job made pending
//     since (committed, or released from a lease) lowers the mark to its
//     due time if earlier, also one committed while that claim was reading:
//     such lowerings are kept (lowered) until a claim has both started its
//     scan at or before them and read at or after their commit. Every
//     fullClaimEvery a claim scans everything, for jobs of endpoints deleted
//     since they were queued (recorded as failed when claimed).
const (
	// fullClaimEvery is how often a claim looks at every pending job.
	fullClaimEvery = 10 * time.Second
	// maxOutcomesPerTxn bounds one RecordOutcomes transaction, well within
	// Badger's transaction limits.
	maxOutcomesPerTxn = 256
)

// jobRecord is a pending job on disk. The lease members are read only from
// stores of rxgate versions that wrote leases to disk (load).
type jobRecord struct {
	ID          string    `json:"id"`
	EventID     string    `json:"event_id"`
	EndpointID  string    `json:"endpoint_id"`
	Round       int       `json:"round"`
	Attempts    int       `json:"attempts"`
	Due         time.Time `json:"due"`
	LeaseID     string    `json:"lease_id,omitempty"`
	LeasedUntil time.Time `json:"leased_until,omitzero"`
}

func fromJob(j *storage.Job) jobRecord {
	return jobRecord{ID: j.ID, EventID: j.EventID, EndpointID: j.EndpointID, Round: j.Round, Attempts: j.Attempts, Due: j.Due}
}

func (r *jobRecord) job() storage.Job {
	return storage.Job{ID: r.ID, EventID: r.EventID, EndpointID: r.EndpointID, Round: r.Round, Attempts: r.Attempts, Due: r.Due}
}

// lease is a claimed job.
type lease struct {
	job storage.Job // as claimed, with its owner, lease id and expiry
	key []byte      // its pending key on disk
	// recording is set while an outcome of the job is being committed:
	// no other outcome, release or reclaim takes the job meanwhile.
	recording bool
}

// jobState is the job store's memory. Lock order: claimMu, then mu; the
// watch's own lock is taken with neither held.
type jobState struct {
	watch storage.Signal
	// claimMu makes claims one at a time: only a claim makes leases, so
	// what a claim saw unleased stays unleased until it is done.
	claimMu sync.Mutex
	// mu guards the fields below; it is never held across a transaction.
	mu     sync.Mutex
	leases map[string]*lease // job id -> its lease
	leased map[string]int    // endpoint id -> its leases
	// low is, per endpoint, where a bounded claim starts its scan.
	low map[string]time.Time
	// lowered holds, per endpoint, the earliest due time of the jobs made
	// pending that no claim is known to have seen, with the newest commit
	// that made one visible (an upper bound) and the newest sequence
	// number; seq numbers the lowerings.
	lowered map[string]lowering
	seq     uint64
	// fullAt is when the next claim scans everything; zero: the next.
	fullAt time.Time
}

// load prepares the job state in Open. Leases of rxgate versions that
// wrote them to disk (jl/{job}) belonged to a process that has died: their
// jobs are made pending again, due as they were.
func (js *jobState) load(s *Store) error {
	js.leases = make(map[string]*lease)
	js.leased = make(map[string]int)
	js.low = make(map[string]time.Time)
	js.lowered = make(map[string]lowering)
	return s.update(context.Background(), func(txn *tx) error {
		var old []jobRecord
		err := s.scan(txn, jobsLeasedPrefix(), func(_, v []byte) error {
			var j jobRecord
			if err := decode(v, &j); err != nil {
				return err
			}
			old = append(old, j)
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range old {
			if err := txn.delete(jobLeasedKey(r.ID)); err != nil {
				return err
			}
			j := r.job()
			if err := putRecord(txn, jobPendingKey(j.EndpointID, j.Due, j.ID), fromJob(&j)); err != nil {
				return err
			}
		}
		return nil
	})
}

// unleaseLocked drops l; the caller holds mu.
func (js *jobState) unleaseLocked(l *lease) {
	delete(js.leases, l.job.ID)
	if js.leased[l.job.EndpointID]--; js.leased[l.job.EndpointID] <= 0 {
		delete(js.leased, l.job.EndpointID)
	}
}

// heldLocked returns j's lease when j presents it; the caller holds mu.
func (js *jobState) heldLocked(j *storage.Job) *lease {
	l := js.leases[j.ID]
	if l == nil || l.job.LeaseID != j.LeaseID {
		return nil
	}
	return l
}

// lowering is jobs made pending: bounded claims of their endpoint must
// start no later than due until one started there and read at commit ts or
// later.
type lowering struct {
	due time.Time
	ts  uint64
	seq uint64
}

// jobsQueued runs after jobs were made pending (committed, or released from
// a lease): bounded claims start no later than their due times, and the
// watchers wake.
func (s *Store) jobsQueued(jobs []storage.Job) {
	if len(jobs) == 0 {
		return
	}
	// The jobs' commit is published by now: the newest published commit
	// is at or after it.
	ts := s.ts.committed.Load()
	s.jobs.mu.Lock()
	for _, j := range jobs {
		if low, ok := s.jobs.low[j.EndpointID]; ok && j.Due.Before(low) {
			s.jobs.low[j.EndpointID] = j.Due
		}
		s.jobs.seq++
		l, ok := s.jobs.lowered[j.EndpointID]
		if !ok || j.Due.Before(l.due) {
			l.due = j.Due
		}
		l.ts, l.seq = max(l.ts, ts), s.jobs.seq
		s.jobs.lowered[j.EndpointID] = l
	}
	s.jobs.mu.Unlock()
	s.jobs.watch.Notify()
}

// WatchJobs returns a channel that receives after jobs were made pending
// (storage.JobStore).
func (s *Store) WatchJobs() (<-chan struct{}, func()) { return s.jobs.watch.Watch() }

// ClaimJobs leases up to req.Max due jobs, endpoints taking turns
// (storage.JobStore; the turns are storage.PlanClaim's, from the heads
// claimHeads reads). It reads in one transaction and writes nothing: the
// leases are kept in memory. Reading each endpoint's head costs one seek:
// the scan does not grow with the backlog.
func (s *Store) ClaimJobs(ctx context.Context, req storage.ClaimRequest) (storage.ClaimResult, error) {
	js := &s.jobs
	js.claimMu.Lock()
	defer js.claimMu.Unlock()
	js.mu.Lock()
	full := !req.Now.Before(js.fullAt)
	if full {
		js.fullAt = req.Now.Add(fullClaimEvery)
	}
	leasedIDs := make(map[string]bool, len(js.leases))
	for id := range js.leases {
		leasedIDs[id] = true
	}
	leased := make(map[string]int, len(js.leased))
	for e, n := range js.leased {
		leased[e] = n
	}
	low := make(map[string]time.Time, len(js.low))
	for e, t := range js.low {
		low[e] = t
		if l, ok := js.lowered[e]; ok && l.due.Before(t) {
			low[e] = l.due
		}
	}
	seq := js.seq // the lowerings the scan starts at or before
	js.mu.Unlock()

	var (
		res    storage.ClaimResult
		keys   [][]byte
		first  map[string]time.Time // per endpoint looked at: its earliest job left pending
		readTs uint64
	)
	err := s.view(ctx, func(txn *tx) error {
		readTs = txn.txn.ReadTs()
		heads, err := s.claimHeads(txn, req, leased, full, low, leasedIDs)
		if err != nil {
			return err
		}
		plan := storage.PlanClaim(req, heads)
		keys, res.NextDue = plan.Jobs, plan.NextDue
		first = make(map[string]time.Time, len(heads))
		for i, h := range heads {
			f := h.Next
			if plan.Taken[i] < len(h.Due) {
				f, _, _ = dueFromJobKey(h.Due[plan.Taken[i]], endpointJobsPrefix(h.Endpoint))
			}
			first[h.Endpoint] = f
		}
		leaseUntil := storage.Timestamp(req.Now.Add(req.LeaseFor))
		if len(keys) > 0 {
			res.Jobs = make([]storage.ClaimedJob, 0, len(keys))
		}
		for _, key := range keys {
			c, err := s.claimed(txn, key, req.Owner, leaseUntil)
			if err != nil {
				return err
			}
			res.Jobs = append(res.Jobs, c)
		}
		return nil
	})
	if err != nil {
		return storage.ClaimResult{}, fmt.Errorf("storage: claim jobs: %w", err)
	}
	js.mu.Lock()
	for i, c := range res.Jobs {
		js.leases[c.ID] = &lease{job: c.Job, key: keys[i]}
		js.leased[c.EndpointID]++
	}
	// An endpoint with nothing left pending starts at the claim's time: a
	// job queued later lowers it (lowered, jobsQueued).
	for e, f := range first {
		if f.IsZero() || f.After(req.Now) {
			f = req.Now
		}
		js.low[e] = f
	}
	for e, l := range js.lowered {
		if l.seq <= seq && l.ts <= readTs {
			delete(js.lowered, e) // the claim's scan started there and saw them
			continue
		}
		if low, ok := js.low[e]; ok && l.due.Before(low) {
			js.low[e] = l.due
		}
	}
	js.mu.Unlock()
	return res, nil
}

// claimHeads reads, per endpoint, the keys of its unleased jobs due by
// the claim's time (at most its allowance, given what it has leased) in
// endpoint order: every endpoint with a pending job when full, else every
// existing endpoint from its low mark.
func (s *Store) claimHeads(txn *tx, req storage.ClaimRequest, leased map[string]int, full bool, low map[string]time.Time, leasedIDs map[string]bool) ([]storage.ClaimHead[[]byte], error) {
	var endpoints []string
	if !full {
		scanKeys(txn, endpointsPrefix(), func(k []byte) {
			endpoints = append(endpoints, string(k[len(prefixEndpoint):]))
		})
	}
	opts := badgerdb.DefaultIteratorOptions
	opts.Prefix = jobsPendingPrefix()
	opts.PrefetchValues = false
	it := txn.iterator(opts)
	defer it.Close()
	var heads []storage.ClaimHead[[]byte]
	// collect reads the due jobs of the endpoint from the iterator's
	// position.
	collect := func(endpoint string) {
		h := storage.ClaimHead[[]byte]{Endpoint: endpoint, Allow: req.AllowanceOf(endpoint, leased[endpoint])}
		prefix := endpointJobsPrefix(endpoint)
		if s.endpointDisabled(txn, endpoint) {
			return // its jobs are held; its low mark stays
		}
		for ; it.ValidForPrefix(prefix); it.Next() {
			due, id, ok := dueFromJobKey(it.Item().Key(), prefix)
			if !ok || leasedIDs[id] {
				continue
			}
			if !h.Takes(due, req.Now) {
				break
			}
			h.Due = append(h.Due, it.Item().KeyCopy(nil))
		}
		heads = append(heads, h)
	}
	if !full {
		for _, e := range endpoints {
			it.Seek(jobPendingKey(e, low[e], ""))
			collect(e)
		}
		return heads, nil
	}
	it.Rewind()
	for it.Valid() {
		rest := it.Item().Key()[len(prefixJobPending):]
		i := bytes.IndexByte(rest, '/')
		if i <= 0 {
			it.Next() // not a job key; never written
			continue
		}
		endpoint := string(rest[:i])
		collect(endpoint)
		it.Seek(nextEndpointSeek(endpoint))
	}
	return heads, nil
}

// endpointDisabled reports whether the endpoint exists and is disabled,
// through the record cache (one map look-up per endpoint and claim while
// the record is unchanged).
func (s *Store) endpointDisabled(txn *tx, id string) bool {
	r, _, err := getCached[endpointRecord](s, txn, endpointKey(id))
	return err == nil && r.DisabledAt != nil
}

// claimed reads the pending job at key with its event's payload and its
// endpoint (nil when deleted; through the record cache: every delivery to
// it reads it), leased to owner until until.
func (s *Store) claimed(txn *tx, key []byte, owner string, until time.Time) (storage.ClaimedJob, error) {
	var r jobRecord
	if err := getRecord(txn, key, &r); err != nil {
		return storage.ClaimedJob{}, err
	}
	c := storage.ClaimedJob{Job: r.job()}
	c.Owner, c.LeaseID, c.LeasedUntil = owner, storage.NewID(), until
	var err error
	if c.Payload, err = getPayload(txn, r.EventID); err != nil {
		return storage.ClaimedJob{}, err
	}
	switch er, _, err := getCached[endpointRecord](s, txn, endpointKey(r.EndpointID)); {
	case err == nil:
		e := er.endpoint()
		c.Endpoint = &e
	case !errors.Is(err, storage.ErrNotFound):
		return storage.ClaimedJob{}, err
	}
	return c, nil
}

// RenewLeases extends the leases of jobs to until (storage.JobStore).
func (s *Store) RenewLeases(_ context.Context, jobs []storage.Job, until time.Time) ([]string, error) {
	var lost []string
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	for i := range jobs {
		l := s.jobs.heldLocked(&jobs[i])
		if l == nil {
			lost = append(lost, jobs[i].ID)
			continue
		}
		l.job.LeasedUntil = storage.Timestamp(until)
	}
	return lost, nil
}

// RecordOutcomes records a batch of attempts in transactions of at most
// maxOutcomesPerTxn outcomes, each one synced write (storage.JobStore).
func (s *Store) RecordOutcomes(ctx context.Context, outcomes []storage.Outcome) ([]storage.Recorded, error) {
	out := make([]storage.Recorded, 0, len(outcomes))
	for len(outcomes) > 0 {
		n := min(len(outcomes), maxOutcomesPerTxn)
		rec, err := s.recordOutcomes(ctx, outcomes[:n])
		if err != nil {
			return nil, err
		}
		out = append(out, rec...)
		outcomes = outcomes[n:]
	}
	return out, nil
}

// recordOutcomes records outcomes in one transaction.
func (s *Store) recordOutcomes(ctx context.Context, outcomes []storage.Outcome) ([]storage.Recorded, error) {
	rec := make([]storage.Recorded, len(outcomes))
	held := make([]*lease, len(outcomes))
	js := &s.jobs
	js.mu.Lock()
	for i := range outcomes {
		l := js.heldLocked(&outcomes[i].Job)
		if l == nil || l.recording {
			rec[i].Err = storage.ErrLeaseLost
			continue
		}
		l.recording = true
		held[i] = l
	}
	js.mu.Unlock()
	var queued []storage.Job
	err := s.updateLater(ctx, func(txn *tx) error {
		queued = nil
		type eventState struct {
			ev  storage.Event
			old string
		}
		events := map[string]*eventState{}
		var order []string
		for i, o := range outcomes {
			l := held[i]
			if l == nil {
				continue
			}
			rec[i].Event = nil
			if err := txn.delete(l.key); err != nil {
				return err
			}
			if o.Next == storage.EventPending {
				next := l.job
				next.Owner, next.LeaseID, next.LeasedUntil = "", "", time.Time{}
				next.Attempts++
				next.Due = storage.Timestamp(o.RetryAt)
				if err := putRecord(txn, jobPendingKey(next.EndpointID, next.Due, next.ID), fromJob(&next)); err != nil {
					return err
				}
				queued = append(queued, next)
			}
			st := events[l.job.EventID]
			if st == nil {
				ev, err := getEvent(txn, l.job.EventID)
				if errors.Is(err, storage.ErrNotFound) {
					continue // the event is gone; nothing to record
				} else if err != nil {
					return err
				}
				st = &eventState{ev: ev, old: ev.Status}
				events[ev.ID] = st
				order = append(order, ev.ID)
			}
			st.ev.RecordAttempt(&l.job, o.Attempt, o.Next)
			ev := st.ev
			ev.Targets, ev.Attempts = slices.Clone(ev.Targets), slices.Clone(ev.Attempts)
			rec[i].Event = &ev
		}
		for _, id := range order {
			if err := putEvent(txn, &events[id].ev, events[id].old); err != nil {
				return err
			}
		}
		return s.recordHealth(txn, outcomes, rec, held)
	})
	js.mu.Lock()
	for _, l := range held {
		if l == nil {
			continue
		}
		if err == nil {
			js.unleaseLocked(l)
		} else {
			l.recording = false
		}
	}
	js.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("storage: record outcomes: %w", err)
	}
	s.jobsQueued(queued)
	return rec, nil
}

// recordHealth updates the failing streaks of the endpoints of the
// recorded outcomes (storage.HealthChanges), writing an endpoint only when
// its streak starts or ends or it is disabled, and marks in rec the
// outcomes that disabled one.
//
// The endpoint is read through the record cache unless this batch wrote
// it: every batch reads its endpoints, and a decode each time would cost
// the delivery path what the claim already avoids.
func (s *Store) recordHealth(txn *tx, outcomes []storage.Outcome, rec []storage.Recorded, held []*lease) error {
	first := map[string]int{}
	for i := len(outcomes) - 1; i >= 0; i-- {
		if held[i] != nil {
			first[outcomes[i].Job.EndpointID] = i
		}
	}
	for _, c := range storage.HealthChanges(outcomes, func(i int) bool { return held[i] != nil }) {
		var r endpointRecord
		var err error
		key := endpointKey(c.Endpoint)
		if _, ok := txn.written(key); ok {
			err = getRecord(txn, key, &r)
		} else {
			r, _, err = getCached[endpointRecord](s, txn, key)
		}
		if errors.Is(err, storage.ErrNotFound) {
			continue // deleted
		} else if err != nil {
			return err
		}
		e := r.endpoint()
		changed, disabled := e.ApplyHealth(c)
		if !changed {
			continue
		}
		if err := putRecord(txn, endpointKey(e.ID), fromEndpoint(&e)); err != nil {
			return err
		}
		if disabled {
			cp := e
			rec[first[c.Endpoint]].Disabled = &cp
		}
	}
	return nil
}

// ReleaseJobs returns leased jobs whose attempt never started to pending,
// due when they were (storage.JobStore). Nothing is written: the jobs
// never left the disk.
func (s *Store) ReleaseJobs(_ context.Context, jobs []storage.Job) error {
	s.releaseWhere(func(l *lease) bool {
		return slices.ContainsFunc(jobs, func(j storage.Job) bool { return j.ID == l.job.ID && j.LeaseID == l.job.LeaseID })
	})
	return nil
}

// ReclaimExpired makes every job whose lease expired by now pending again
// (storage.JobStore); its due time, which has passed, stays.
func (s *Store) ReclaimExpired(_ context.Context, now time.Time) (int, error) {
	return s.releaseWhere(func(l *lease) bool { return !l.job.LeasedUntil.After(now) }), nil
}

// releaseWhere drops the leases that match and are not being recorded, and
// returns how many it dropped.
func (s *Store) releaseWhere(match func(*lease) bool) int {
	var freed []storage.Job
	s.jobs.mu.Lock()
	for _, l := range s.jobs.leases {
		if !l.recording && match(l) {
			s.jobs.unleaseLocked(l)
			j := l.job
			j.Owner, j.LeaseID, j.LeasedUntil = "", "", time.Time{}
			freed = append(freed, j)
		}
	}
	s.jobs.mu.Unlock()
	s.jobsQueued(freed)
	return len(freed)
}

// ListJobs returns every pending job (by endpoint, then due time) and every
// leased job, by id (storage.JobStore).
func (s *Store) ListJobs(ctx context.Context) (pending, leased []storage.Job, err error) {
	s.jobs.mu.Lock()
	for _, l := range s.jobs.leases {
		leased = append(leased, l.job)
	}
	s.jobs.mu.Unlock()
	slices.SortFunc(leased, func(a, b storage.Job) int { return strings.Compare(a.ID, b.ID) })
	err = s.view(ctx, func(txn *tx) error {
		return s.scan(txn, jobsPendingPrefix(), func(_, v []byte) error {
			var r jobRecord
			if err := decode(v, &r); err != nil {
				return err
			}
			if !slices.ContainsFunc(leased, func(j storage.Job) bool { return j.ID == r.ID }) {
				pending = append(pending, r.job())
			}
			return nil
		})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("storage: list jobs: %w", err)
	}
	return pending, leased, nil
}

// JobStats implements storage.JobStore: it reads the pending jobs' keys
// only (each holds its due time), not their records.
func (s *Store) JobStats(ctx context.Context) (storage.JobStats, error) {
	leased := map[string]bool{}
	s.jobs.mu.Lock()
	for _, l := range s.jobs.leases {
		leased[l.job.ID] = true
	}
	s.jobs.mu.Unlock()
	st := storage.JobStats{Leased: len(leased)}
	err := s.view(ctx, func(txn *tx) error {
		opts := badgerdb.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = jobsPendingPrefix()
		it := txn.iterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			key := it.Item().Key()
			slash := bytes.IndexByte(key[len(prefixJobPending):], '/')
			if slash < 0 {
				continue
			}
			due, id, ok := dueFromJobKey(key, key[:len(prefixJobPending)+slash+1])
			if !ok || leased[id] {
				continue
			}
			st.Pending++
			if st.OldestDue.IsZero() || due.Before(st.OldestDue) {
				st.OldestDue = due
			}
		}
		return nil
	})
	if err != nil {
		return storage.JobStats{}, fmt.Errorf("storage: job stats: %w", err)
	}
	return st, nil
}
