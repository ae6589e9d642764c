package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"

	"github.com/rxgate/rxgate/storage"
)

// The job store (storage.JobStore). A pending job lives at
// jp/{endpoint}/{due}{job}, so each endpoint's due work is one prefix scan
// from its start; a leased one at jl/{job}.
//
// Two things are kept in memory, which only one process owning the
// directory allows (Badger locks it):
//
//   - How many jobs each endpoint has leased: the claim's per-endpoint
//     limit needs it, and counting jl/ keys on every claim would step over
//     every deletion marker the endpoint's history left there.
//   - Where each endpoint's pending jobs begin (low, below). A claimed or
//     finished job's key is deleted, and Badger keeps a deletion marker
//     that every scan from the start of the endpoint's range must step
//     over until compaction drops it; under sustained load the markers
//     outnumber the live jobs by far, and a scan from the start costs as
//     much as the endpoint's whole history. So a claim starts each
//     endpoint's scan at the earlier of the earliest due time the last
//     claim left pending and that claim's time less claimWindow: a job the
//     last claim could not see committed after it, and a new job is due at
//     its transaction's start, which precedes its commit by milliseconds.
//     Every fullClaimEvery a claim scans everything, for a job whose
//     commit took longer than the margin and for jobs of endpoints deleted
//     since they were queued (recorded as failed when claimed).
//
// A lease records the Open that made it (instance): a lease of an earlier
// Open belongs to a process that has died, so ReclaimExpired takes it at
// once, whatever its expiry.
const (
	// claimWindow bounds how long before a claim a job it could not see yet
	// may be due: far more than a transaction takes from reading the clock
	// to committing.
	claimWindow = 250 * time.Millisecond
	// fullClaimEvery is how often a claim looks at every pending job.
	fullClaimEvery = 10 * time.Second
)

type jobRecord struct {
	ID          string    `json:"id"`
	EventID     string    `json:"event_id"`
	EndpointID  string    `json:"endpoint_id"`
	Round       int       `json:"round"`
	Attempts    int       `json:"attempts"`
	Due         time.Time `json:"due"`
	Owner       string    `json:"owner,omitempty"`
	LeaseID     string    `json:"lease_id,omitempty"`
	LeasedUntil time.Time `json:"leased_until,omitzero"`
	// Instance is the Open that leased the job.
	Instance string `json:"instance,omitempty"`
}

func fromJob(j *storage.Job) jobRecord {
	return jobRecord{ID: j.ID, EventID: j.EventID, EndpointID: j.EndpointID, Round: j.Round, Attempts: j.Attempts,
		Due: j.Due, Owner: j.Owner, LeaseID: j.LeaseID, LeasedUntil: j.LeasedUntil}
}

func (r *jobRecord) job() storage.Job {
	return storage.Job{ID: r.ID, EventID: r.EventID, EndpointID: r.EndpointID, Round: r.Round, Attempts: r.Attempts,
		Due: r.Due, Owner: r.Owner, LeaseID: r.LeaseID, LeasedUntil: r.LeasedUntil}
}

// jobState is the job store's memory. Lock order: claimMu, then mu; the
// watch's own lock is taken with neither held.
type jobState struct {
	// instance names this Open; it is stamped on every lease.
	instance string
	watch    storage.Signal
	// claimMu makes claims one at a time: a claim reads the lease counts,
	// commits and raises them before the next reads them.
	claimMu sync.Mutex
	// mu guards the fields below; it is never held across a transaction.
	mu sync.Mutex
	// leased counts each endpoint's leased jobs, every owner's, until they
	// are finished, released or reclaimed. After a commit that ends leases
	// it is lowered, so it is never below the truth.
	leased map[string]int
	// low is, per endpoint, where a bounded claim starts its scan.
	low map[string]time.Time
	// fullAt is when the next claim scans everything; zero: the next.
	fullAt time.Time
}

// load counts the leases on disk; it runs once, in Open.
func (js *jobState) load(s *Store) error {
	js.instance = storage.NewID()
	js.leased = make(map[string]int)
	js.low = make(map[string]time.Time)
	return s.view(context.Background(), func(txn *badgerdb.Txn) error {
		return s.scan(txn, jobsLeasedPrefix(), func(_, v []byte) error {
			var j jobRecord
			if err := decode(v, &j); err != nil {
				return err
			}
			js.leased[j.EndpointID]++
			return nil
		})
	})
}

// released lowers the lease counts after a commit that ended leases.
func (js *jobState) released(endpoints map[string]int) {
	js.mu.Lock()
	defer js.mu.Unlock()
	for e, n := range endpoints {
		if js.leased[e] -= n; js.leased[e] <= 0 {
			delete(js.leased, e)
		}
	}
}

// jobsQueued runs after a commit that made jobs pending: bounded claims
// start no later than their due times, and the watchers wake.
func (s *Store) jobsQueued(jobs []storage.Job) {
	if len(jobs) == 0 {
		return
	}
	s.jobs.mu.Lock()
	for _, j := range jobs {
		if low, ok := s.jobs.low[j.EndpointID]; ok && j.Due.Before(low) {
			s.jobs.low[j.EndpointID] = j.Due
		}
	}
	s.jobs.mu.Unlock()
	s.jobs.watch.Notify()
}

// WatchJobs returns a channel that receives after a commit that made jobs
// pending (storage.JobStore).
func (s *Store) WatchJobs() (<-chan struct{}, func()) { return s.jobs.watch.Watch() }

// ClaimJobs leases up to req.Max due jobs in one transaction, endpoints
// taking turns (storage.JobStore). Reading each endpoint's head costs one
// seek: the scan does not grow with the backlog.
func (s *Store) ClaimJobs(ctx context.Context, req storage.ClaimRequest) (storage.ClaimResult, error) {
	js := &s.jobs
	js.claimMu.Lock()
	defer js.claimMu.Unlock()
	js.mu.Lock()
	full := !req.Now.Before(js.fullAt)
	if full {
		js.fullAt = req.Now.Add(fullClaimEvery)
	}
	leased := make(map[string]int, len(js.leased))
	for e, n := range js.leased {
		leased[e] = n
	}
	low := make(map[string]time.Time, len(js.low))
	for e, t := range js.low {
		low[e] = t
	}
	js.mu.Unlock()
	allow := func(endpoint string) int {
		if req.PerEndpoint <= 0 {
			return req.Max
		}
		return max(0, min(req.Max, req.PerEndpoint-leased[endpoint]))
	}

	var (
		res   storage.ClaimResult
		first map[string]time.Time // per endpoint looked at: its earliest job left pending
	)
	err := s.update(ctx, func(txn *badgerdb.Txn) error {
		res, first = storage.ClaimResult{}, nil
		heads, err := s.claimHeads(txn, req.Now, allow, full, low)
		if err != nil {
			return err
		}
		keys, picked := takeTurns(heads, req.After, req.Max)
		first = make(map[string]time.Time, len(heads))
		for i, h := range heads {
			f := h.next
			if picked[i] < len(h.due) {
				f, _, _ = dueFromJobKey(h.due[picked[i]], endpointJobsPrefix(h.endpoint))
			}
			first[h.endpoint] = f
			if picked[i] >= h.allow {
				continue // the endpoint may take no more now
			}
			next := h.next
			if picked[i] < len(h.due) {
				next = req.Now // due, but Max was reached
			}
			if !next.IsZero() && (res.NextDue.IsZero() || next.Before(res.NextDue)) {
				res.NextDue = next
			}
		}
		leaseUntil := storage.Timestamp(req.Now.Add(req.LeaseFor))
		for _, key := range keys {
			c, err := s.lease(txn, key, req.Owner, leaseUntil)
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
	for _, j := range res.Jobs {
		js.leased[j.EndpointID]++
	}
	from := req.Now.Add(-claimWindow)
	for e, f := range first {
		js.low[e] = from
		if !f.IsZero() && f.Before(from) {
			js.low[e] = f
		}
	}
	js.mu.Unlock()
	return res, nil
}

// head is one endpoint's due jobs as a claim sees them.
type head struct {
	endpoint string
	due      [][]byte  // keys of due jobs, in due order, at most allow
	next     time.Time // due time of the first job not in due; zero if none
	allow    int
}

// claimHeads reads, per endpoint, the keys of its jobs due by now (at most
// what allow gives it) in endpoint order: every endpoint with a pending job
// when full, else every existing endpoint from its low mark.
func (s *Store) claimHeads(txn *badgerdb.Txn, now time.Time, allow func(string) int, full bool, low map[string]time.Time) ([]head, error) {
	var endpoints []string
	if !full {
		scanKeys(txn, endpointsPrefix(), func(k []byte) {
			endpoints = append(endpoints, string(k[len(prefixEndpoint):]))
		})
	}
	opts := badgerdb.DefaultIteratorOptions
	opts.Prefix = jobsPendingPrefix()
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	var heads []head
	// collect reads the due jobs of the endpoint from the iterator's
	// position.
	collect := func(endpoint string) {
		h := head{endpoint: endpoint, allow: allow(endpoint)}
		prefix := endpointJobsPrefix(endpoint)
		for ; it.ValidForPrefix(prefix); it.Next() {
			due, _, ok := dueFromJobKey(it.Item().Key(), prefix)
			if !ok {
				continue
			}
			if due.After(now) || len(h.due) >= h.allow {
				h.next = due
				break
			}
			h.due = append(h.due, it.Item().KeyCopy(nil))
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

// takeTurns picks up to max of the heads' due jobs, the endpoints taking
// turns, one job each per turn, starting with the first endpoint after
// after (heads are in endpoint order). It returns the keys in the order of
// the turns, and how many each head gave.
func takeTurns(heads []head, after string, max int) (keys [][]byte, taken []int) {
	taken = make([]int, len(heads))
	start := 0
	for i, h := range heads {
		if h.endpoint > after {
			start = i
			break
		}
	}
	for progress := true; progress && len(keys) < max; {
		progress = false
		for n := range heads {
			i := (start + n) % len(heads)
			if taken[i] < len(heads[i].due) && len(keys) < max {
				keys = append(keys, heads[i].due[taken[i]])
				taken[i]++
				progress = true
			}
		}
	}
	return keys, taken
}

// lease moves the pending job at key to leased and returns it with its
// event's payload and its endpoint (nil when deleted).
func (s *Store) lease(txn *badgerdb.Txn, key []byte, owner string, until time.Time) (storage.ClaimedJob, error) {
	var j jobRecord
	if err := getRecord(txn, key, &j); err != nil {
		return storage.ClaimedJob{}, err
	}
	if err := txn.Delete(key); err != nil {
		return storage.ClaimedJob{}, err
	}
	j.Owner, j.LeaseID, j.LeasedUntil, j.Instance = owner, storage.NewID(), until, s.jobs.instance
	if err := putRecord(txn, jobLeasedKey(j.ID), j); err != nil {
		return storage.ClaimedJob{}, err
	}
	c := storage.ClaimedJob{Job: j.job()}
	var ev eventRecord
	if err := getRecord(txn, eventKey(j.EventID), &ev); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return storage.ClaimedJob{}, err
	}
	c.Payload = ev.Payload
	var er endpointRecord
	switch err := getRecord(txn, endpointKey(j.EndpointID), &er); {
	case err == nil:
		e := er.endpoint()
		c.Endpoint = &e
	case !errors.Is(err, storage.ErrNotFound):
		return storage.ClaimedJob{}, err
	}
	return c, nil
}

// leasedJob reads j's lease; ErrLeaseLost when j no longer holds it.
func leasedJob(txn *badgerdb.Txn, j *storage.Job) (jobRecord, error) {
	var cur jobRecord
	if !storage.ValidID(j.ID) {
		return cur, storage.ErrLeaseLost
	}
	if err := getRecord(txn, jobLeasedKey(j.ID), &cur); errors.Is(err, storage.ErrNotFound) {
		return cur, storage.ErrLeaseLost
	} else if err != nil {
		return cur, err
	}
	if cur.LeaseID != j.LeaseID {
		return cur, storage.ErrLeaseLost
	}
	return cur, nil
}

// RenewLeases extends the leases of jobs to until (storage.JobStore).
func (s *Store) RenewLeases(ctx context.Context, jobs []storage.Job, until time.Time) ([]string, error) {
	var lost []string
	err := s.update(ctx, func(txn *badgerdb.Txn) error {
		lost = nil
		for i := range jobs {
			cur, err := leasedJob(txn, &jobs[i])
			if errors.Is(err, storage.ErrLeaseLost) {
				lost = append(lost, jobs[i].ID)
				continue
			} else if err != nil {
				return err
			}
			cur.LeasedUntil = storage.Timestamp(until)
			if err := putRecord(txn, jobLeasedKey(cur.ID), cur); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: renew leases: %w", err)
	}
	return lost, nil
}

// CompleteJob records a successful attempt (storage.JobStore).
func (s *Store) CompleteJob(ctx context.Context, j *storage.Job, a storage.Attempt) (*storage.Event, error) {
	return s.finishJob(ctx, "complete", j, a, storage.EventDelivered, time.Time{})
}

// RetryJob records a failed attempt after which another follows
// (storage.JobStore).
func (s *Store) RetryJob(ctx context.Context, j *storage.Job, a storage.Attempt, due time.Time) (*storage.Event, error) {
	return s.finishJob(ctx, "retry", j, a, storage.EventPending, due)
}

// ArchiveJob records an attempt after which no other follows
// (storage.JobStore).
func (s *Store) ArchiveJob(ctx context.Context, j *storage.Job, a storage.Attempt) (*storage.Event, error) {
	return s.finishJob(ctx, "archive", j, a, storage.EventFailed, time.Time{})
}

// finishJob ends j's lease with attempt a, leaving the target with status
// (storage.EventPending re-queues the job at due), and records the attempt
// on the event in the same transaction. The event returned is nil when it
// is gone.
func (s *Store) finishJob(ctx context.Context, verb string, j *storage.Job, a storage.Attempt, status string, due time.Time) (*storage.Event, error) {
	var (
		ev       *storage.Event
		queued   []storage.Job
		endpoint string
	)
	err := s.update(ctx, func(txn *badgerdb.Txn) error {
		ev, queued = nil, nil
		cur, err := leasedJob(txn, j)
		if err != nil {
			return err
		}
		endpoint = cur.EndpointID
		if err := txn.Delete(jobLeasedKey(cur.ID)); err != nil {
			return err
		}
		done := cur.job()
		if status == storage.EventPending {
			next := storage.Job{ID: cur.ID, EventID: cur.EventID, EndpointID: cur.EndpointID, Round: cur.Round,
				Attempts: cur.Attempts + 1, Due: storage.Timestamp(due)}
			if err := putRecord(txn, jobPendingKey(next.EndpointID, next.Due, next.ID), fromJob(&next)); err != nil {
				return err
			}
			queued = []storage.Job{next}
		}
		e, err := getEvent(txn, cur.EventID)
		if errors.Is(err, storage.ErrNotFound) {
			return nil // the event is gone; nothing to record
		} else if err != nil {
			return err
		}
		old := e.Status
		e.RecordAttempt(&done, a, status)
		ev = &e
		return putEvent(txn, &e, old)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: %s job: %w", verb, err)
	}
	s.jobs.released(map[string]int{endpoint: 1})
	s.jobsQueued(queued)
	return ev, nil
}

// ReleaseJobs returns leased jobs whose attempt never started to pending,
// due when they were (storage.JobStore).
func (s *Store) ReleaseJobs(ctx context.Context, jobs []storage.Job) error {
	_, err := s.unleaseJobs(ctx, "release jobs", func(txn *badgerdb.Txn) ([]jobRecord, error) {
		var held []jobRecord
		for i := range jobs {
			cur, err := leasedJob(txn, &jobs[i])
			if errors.Is(err, storage.ErrLeaseLost) {
				continue
			} else if err != nil {
				return nil, err
			}
			held = append(held, cur)
		}
		return held, nil
	}, func(r *jobRecord) time.Time { return r.Due })
	return err
}

// ReclaimExpired makes every job whose lease expired by now, or was made by
// an earlier Open of the store (its process is dead), pending again, due at
// now (storage.JobStore).
func (s *Store) ReclaimExpired(ctx context.Context, now time.Time) (int, error) {
	return s.unleaseJobs(ctx, "reclaim expired leases", func(txn *badgerdb.Txn) ([]jobRecord, error) {
		var expired []jobRecord
		err := s.scan(txn, jobsLeasedPrefix(), func(_, v []byte) error {
			var j jobRecord
			if err := decode(v, &j); err != nil {
				return err
			}
			if !j.LeasedUntil.After(now) || j.Instance != s.jobs.instance {
				expired = append(expired, j)
			}
			return nil
		})
		return expired, err
	}, func(*jobRecord) time.Time { return now })
}

// unleaseJobs moves the leased jobs pick chooses back to pending, each due
// at due(job), without counting an attempt, in one transaction, and
// returns how many it moved.
func (s *Store) unleaseJobs(ctx context.Context, verb string, pick func(*badgerdb.Txn) ([]jobRecord, error), due func(*jobRecord) time.Time) (int, error) {
	var (
		ended  map[string]int
		queued []storage.Job
	)
	err := s.update(ctx, func(txn *badgerdb.Txn) error {
		ended, queued = map[string]int{}, nil
		picked, err := pick(txn)
		if err != nil {
			return err
		}
		for i := range picked {
			j, err := unlease(txn, &picked[i], due(&picked[i]))
			if err != nil {
				return err
			}
			ended[j.EndpointID]++
			queued = append(queued, j)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storage: %s: %w", verb, err)
	}
	s.jobs.released(ended)
	s.jobsQueued(queued)
	return len(queued), nil
}

// unlease moves a leased job back to pending, due at due, and returns it.
func unlease(txn *badgerdb.Txn, r *jobRecord, due time.Time) (storage.Job, error) {
	if err := txn.Delete(jobLeasedKey(r.ID)); err != nil {
		return storage.Job{}, err
	}
	j := r.job()
	j.Owner, j.LeaseID, j.LeasedUntil, j.Due = "", "", time.Time{}, storage.Timestamp(due)
	return j, putRecord(txn, jobPendingKey(j.EndpointID, j.Due, j.ID), fromJob(&j))
}

// ListJobs returns every pending job (by endpoint, then due time) and every
// leased job (storage.JobStore).
func (s *Store) ListJobs(ctx context.Context) (pending, leased []storage.Job, err error) {
	err = s.view(ctx, func(txn *badgerdb.Txn) error {
		collect := func(out *[]storage.Job) func(_, v []byte) error {
			return func(_, v []byte) error {
				var j jobRecord
				if err := decode(v, &j); err != nil {
					return err
				}
				*out = append(*out, j.job())
				return nil
			}
		}
		if err := s.scan(txn, jobsPendingPrefix(), collect(&pending)); err != nil {
			return err
		}
		return s.scan(txn, jobsLeasedPrefix(), collect(&leased))
	})
	if err != nil {
		return nil, nil, fmt.Errorf("storage: list jobs: %w", err)
	}
	return pending, leased, nil
}
