package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Events and their delivery jobs.
//
// An event is written in the transaction of the change it announces (today
// only CreatePrescription), together with one pending job per webhook
// endpoint of the organization's partner, so that an uncommitted change is
// never announced and a committed one is never lost. The event keeps the
// exact body that is delivered and signed, its status and every attempt; a
// job is one endpoint's place in the delivery queue:
//
//	pending (jp/, by endpoint and due time) --ClaimJobs--> leased (jl/)
//	leased --CompleteJob--> gone, target delivered
//	leased --RetryJob--> pending again, due later, one more attempt counted
//	leased --ArchiveJob--> gone, target failed (permanently)
//	leased --ReleaseJobs / ReclaimJobs--> pending, the attempt not counted
//
// A job never waits anywhere else, so a restart finds every queued event
// either pending or leased; leased jobs of a dead process are reclaimed.

// Event types.
const (
	// EventPrescriptionCreated is spec 6's prescription.created.
	EventPrescriptionCreated = "prescription.created"
)

// Event statuses.
const (
	// EventSkipped: nothing is sent; SkipReason says why.
	EventSkipped = "skipped"
	// EventPending: some endpoint's delivery is queued or in flight.
	EventPending = "pending"
	// EventDelivered: every endpoint answered 2xx.
	EventDelivered = "delivered"
	// EventFailed: no delivery is left and at least one endpoint failed
	// permanently. Nothing is re-sent unless the operator replays it.
	EventFailed = "failed"
)

// EventStatuses lists every event status.
var EventStatuses = []string{EventSkipped, EventPending, EventDelivered, EventFailed}

// Reasons an event is skipped.
const (
	// SkipNotValidated: validate had not succeeded for the organization
	// (spec 6.1).
	SkipNotValidated = "organization_not_validated"
	// SkipNoEndpoints: the partner had no webhook endpoint.
	SkipNoEndpoints = "no_webhook_endpoint"
)

// Event delivery targets' statuses: EventPending, EventDelivered or
// EventFailed.

// Errors of ReplayEvent and of the job operations.
var (
	// ErrEventPending: the event is still being delivered.
	ErrEventPending = errors.New("storage: event is still being delivered")
	// ErrNotValidated: validate has not succeeded for the organization.
	ErrNotValidated = errors.New("storage: organization not validated")
	// ErrNoEndpoints: the partner has no webhook endpoint.
	ErrNoEndpoints = errors.New("storage: partner has no webhook endpoint")
	// ErrLeaseLost: the job is no longer leased under this lease (it was
	// released or reclaimed); its result must be dropped.
	ErrLeaseLost = errors.New("storage: job lease lost")
)

// Event is something that happened and that partners are told about.
type Event struct {
	ID             string
	Type           string
	OrganizationID string
	PartnerID      string
	CreatedAt      time.Time
	// Payload is the exact body delivered (spec 6.2); every attempt sends
	// these bytes.
	Payload    []byte
	Status     string
	SkipReason string
	// Round counts the rounds of delivery: 1 for the first, one more per
	// replay.
	Round int
	// Targets are the endpoints of the current round and how each fared.
	Targets []EventTarget
	// Attempts lists every attempt of every round, oldest first.
	Attempts []Attempt
}

// EventTarget is one endpoint's delivery of an event in the current round.
type EventTarget struct {
	EndpointID string `json:"endpoint_id"`
	// Status is EventPending, EventDelivered or EventFailed.
	Status string `json:"status"`
}

// Attempt is one delivery attempt.
type Attempt struct {
	AttemptedAt time.Time `json:"attempted_at"`
	EndpointID  string    `json:"endpoint_id"`
	// StatusCode is the endpoint's HTTP status, 0 when there was no
	// response.
	StatusCode int `json:"status_code"`
	// Error says why the attempt failed; "" when it succeeded.
	Error      string `json:"error"`
	DurationMS int64  `json:"duration_ms"`
}

// EventPayload is the body of a delivery: spec 6.2's envelope.
type EventPayload struct {
	EventType      string `json:"event_type"`
	EventID        string `json:"event_id"`
	Timestamp      string `json:"timestamp"`
	PartnerID      string `json:"partner_id"`
	OrganizationID string `json:"organization_id"`
	Data           any    `json:"data"`
}

// PrescriptionCreatedData is the data of prescription.created (spec 6.2).
type PrescriptionCreatedData struct {
	PatientID        string `json:"patient_id"`
	PartnerPatientID string `json:"partner_patient_id"`
	UserID           string `json:"user_id"`
	SCID             string `json:"scid"`
}

// eventTimestampLayout is the payload's timestamp: RFC 3339 in UTC with
// milliseconds, as the response envelopes write theirs.
const eventTimestampLayout = "2006-01-02T15:04:05.000Z07:00"

// Job is one endpoint's queued delivery of one event.
type Job struct {
	ID         string
	EventID    string
	EndpointID string
	// Round is the event's round the job belongs to.
	Round int
	// Attempts counts the attempts already made in this round.
	Attempts int
	// Due is when the next attempt may start.
	Due time.Time
	// LeaseID and LeasedUntil are set while the job is leased: the
	// finishing operations must present the LeaseID.
	LeaseID     string
	LeasedUntil time.Time
}

// ClaimedJob is a leased job with what its attempt needs.
type ClaimedJob struct {
	Job
	// Payload is the event's body.
	Payload []byte
	// Endpoint is nil when the endpoint was deleted after the job was
	// queued.
	Endpoint *WebhookEndpoint
}

type eventRecord struct {
	ID         string        `json:"id"`
	Type       string        `json:"type"`
	OrgID      string        `json:"org_id"`
	PartnerID  string        `json:"partner_id"`
	CreatedAt  time.Time     `json:"created_at"`
	Payload    []byte        `json:"payload"`
	Status     string        `json:"status"`
	SkipReason string        `json:"skip_reason,omitempty"`
	Round      int           `json:"round"`
	Targets    []EventTarget `json:"targets,omitempty"`
	Attempts   []Attempt     `json:"attempts,omitempty"`
}

func (r *eventRecord) event() Event {
	return Event{
		ID: r.ID, Type: r.Type, OrganizationID: r.OrgID, PartnerID: r.PartnerID, CreatedAt: r.CreatedAt,
		Payload: r.Payload, Status: r.Status, SkipReason: r.SkipReason, Round: r.Round,
		Targets: slices.Clone(r.Targets), Attempts: slices.Clone(r.Attempts),
	}
}

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

func (r *jobRecord) job() Job {
	return Job{ID: r.ID, EventID: r.EventID, EndpointID: r.EndpointID, Round: r.Round, Attempts: r.Attempts,
		Due: r.Due, LeaseID: r.LeaseID, LeasedUntil: r.LeasedUntil}
}

// emitPrescriptionCreated writes prescription.created for p, created in the
// running transaction, and queues its delivery to every endpoint of the
// organization's partner; or, when validate has not succeeded for the
// organization or the partner has no endpoint, records it as skipped.
func (s *Store) emitPrescriptionCreated(txn *badger.Txn, p *Prescription, patient *patientRecord) error {
	var org organizationRecord
	if err := getRecord(txn, organizationKey(p.OrgID), &org); err != nil {
		return fmt.Errorf("organization %w", err)
	}
	now := s.nowUTC()
	r := &eventRecord{
		ID: NewID(), Type: EventPrescriptionCreated, OrgID: org.ID, PartnerID: org.PartnerID, CreatedAt: now, Round: 1,
	}
	payload, err := json.Marshal(EventPayload{
		EventType: r.Type, EventID: r.ID, Timestamp: now.Format(eventTimestampLayout),
		PartnerID: r.PartnerID, OrganizationID: r.OrgID,
		Data: PrescriptionCreatedData{PatientID: p.PatientID, PartnerPatientID: patient.PartnerPatientID, UserID: p.UserID, SCID: p.SCID},
	})
	if err != nil {
		return fmt.Errorf("storage: encode event: %w", err)
	}
	r.Payload = payload
	return s.startRound(txn, r, org.ValidatedAt != nil, now, "")
}

// startRound queues a round of deliveries of r to every endpoint of its
// partner, due at now, or marks r skipped, and writes r with its indexes.
// oldStatus is r's status before ("" for a new event).
func (s *Store) startRound(txn *badger.Txn, r *eventRecord, validated bool, now time.Time, oldStatus string) error {
	r.Targets, r.SkipReason = nil, ""
	if !validated {
		r.Status, r.SkipReason = EventSkipped, SkipNotValidated
		return putEvent(txn, r, oldStatus)
	}
	endpoints, err := partnerEndpoints(txn, r.PartnerID)
	if err != nil {
		return err
	}
	if len(endpoints) == 0 {
		r.Status, r.SkipReason = EventSkipped, SkipNoEndpoints
		return putEvent(txn, r, oldStatus)
	}
	r.Status = EventPending
	for _, e := range endpoints {
		j := jobRecord{ID: NewID(), EventID: r.ID, EndpointID: e.ID, Round: r.Round, Due: now}
		if err := putRecord(txn, jobPendingKey(e.ID, now, j.ID), j); err != nil {
			return err
		}
		r.Targets = append(r.Targets, EventTarget{EndpointID: e.ID, Status: EventPending})
	}
	return putEvent(txn, r, oldStatus)
}

// putEvent writes r and moves its status indexes from oldStatus.
func putEvent(txn *badger.Txn, r *eventRecord, oldStatus string) error {
	if oldStatus == "" {
		if err := txn.Set(eventOrgKey(r.OrgID, r.ID), nil); err != nil {
			return err
		}
	}
	if oldStatus != r.Status {
		if oldStatus != "" {
			if err := txn.Delete(eventStatusKey(oldStatus, r.ID)); err != nil {
				return err
			}
			if err := txn.Delete(eventOrgStatusKey(r.OrgID, oldStatus, r.ID)); err != nil {
				return err
			}
		}
		if err := txn.Set(eventStatusKey(r.Status, r.ID), nil); err != nil {
			return err
		}
		if err := txn.Set(eventOrgStatusKey(r.OrgID, r.Status, r.ID), nil); err != nil {
			return err
		}
	}
	return putRecord(txn, eventKey(r.ID), r)
}

// GetEvent returns the event with id.
func (s *Store) GetEvent(ctx context.Context, id string) (*Event, error) {
	if !validID(id) {
		return nil, fmt.Errorf("storage: get event: %w", ErrNotFound)
	}
	var r eventRecord
	if err := s.view(ctx, func(txn *badger.Txn) error { return getRecord(txn, eventKey(id), &r) }); err != nil {
		return nil, fmt.Errorf("storage: get event: %w", err)
	}
	e := r.event()
	return &e, nil
}

// EventFilter narrows ListEvents; an empty member matches everything.
type EventFilter struct {
	OrganizationID string
	// Status is one of EventStatuses.
	Status string
}

// ListEvents returns one page of the events matching f, oldest first. The
// filters are served from indexes, so a page costs the same whatever the
// filter and however deep. ErrBadCursor means a lastKey not issued for this
// filter.
func (s *Store) ListEvents(ctx context.Context, f EventFilter, req PageRequest) ([]Event, PageInfo, error) {
	out := make([]Event, 0, req.Limit)
	if (f.OrganizationID != "" && !validID(f.OrganizationID)) || (f.Status != "" && !slices.Contains(EventStatuses, f.Status)) {
		return out, PageInfo{Limit: req.Limit}, nil
	}
	prefix := eventsPrefix(f.OrganizationID, f.Status)
	var info PageInfo
	err := s.view(ctx, func(txn *badger.Txn) (err error) {
		info, err = s.listPage(txn, prefix, req, func(k, v []byte) error {
			var r eventRecord
			if bytes.Equal(prefix, []byte(prefixEvent)) {
				if err := decode(v, &r); err != nil {
					return err
				}
			} else if err := getRecord(txn, eventKey(string(k[len(prefix):])), &r); err != nil {
				return err
			}
			out = append(out, r.event())
			return nil
		})
		return err
	})
	if err != nil {
		return nil, PageInfo{Limit: req.Limit}, fmt.Errorf("storage: list events: %w", err)
	}
	return out, info, nil
}

// ReplayEvent queues a fresh round of deliveries of the event, with the
// same event id and body, to every endpoint its partner has now; attempts
// already made are kept. ErrEventPending, ErrNotValidated and
// ErrNoEndpoints say why it cannot.
func (s *Store) ReplayEvent(ctx context.Context, id string) (*Event, error) {
	if !validID(id) {
		return nil, fmt.Errorf("storage: replay event: %w", ErrNotFound)
	}
	now := s.nowUTC()
	var r eventRecord
	err := s.update(ctx, func(txn *badger.Txn) error {
		r = eventRecord{}
		if err := getRecord(txn, eventKey(id), &r); err != nil {
			return err
		}
		if r.Status == EventPending {
			return ErrEventPending
		}
		var org organizationRecord
		if err := getRecord(txn, organizationKey(r.OrgID), &org); err != nil {
			return fmt.Errorf("organization %w", err)
		}
		if org.ValidatedAt == nil {
			return ErrNotValidated
		}
		if ids, err := partnerEndpoints(txn, r.PartnerID); err != nil {
			return err
		} else if len(ids) == 0 {
			return ErrNoEndpoints
		}
		old := r.Status
		r.Round++
		return s.startRound(txn, &r, true, now, old)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: replay event: %w", err)
	}
	e := r.event()
	return &e, nil
}

// ClaimRequest says which jobs ClaimJobs may lease.
type ClaimRequest struct {
	// Now is the time jobs must be due by.
	Now time.Time
	// LeaseFor is how long the lease lasts.
	LeaseFor time.Duration
	// Max is the most jobs to lease.
	Max int
	// Allow returns how many more jobs of the endpoint may be leased; nil
	// allows Max.
	Allow func(endpointID string) int
	// After is the endpoint that was served first last time: the
	// round-robin starts with the endpoint after it.
	After string
	// Since, when set, bounds the scan: only endpoints that exist are
	// looked at, each from the due time Since returns for it (zero: from
	// its first job). Nil looks at every job, those of endpoints deleted
	// since included.
	//
	// Why: a claimed or finished job's key is deleted, and Badger keeps a
	// deletion marker that every scan from the start of the endpoint's
	// range must step over until compaction drops it; under sustained load
	// those markers outnumber the live jobs by far, and a scan from the
	// start costs as much as the endpoint's whole history. The caller
	// passes, per endpoint, the earlier of the earliest due time the last
	// claim reported in ClaimResult.Pending and that claim's Now less a
	// margin: a job that claim could not see committed after it, and a
	// new job is due at its transaction's start, which precedes its
	// commit by milliseconds. A full claim now and then finds a job whose
	// commit took longer than the margin.
	Since func(endpointID string) time.Time
}

// ClaimResult is what ClaimJobs leased.
type ClaimResult struct {
	Jobs []ClaimedJob
	// NextDue is the earliest due time among the jobs left pending whose
	// endpoint may take more; zero when there are none.
	NextDue time.Time
	// Pending has, for every endpoint looked at, the due time of its
	// earliest job left pending at or after where the scan started; zero
	// when it has none.
	Pending map[string]time.Time
}

// ClaimJobs leases up to req.Max jobs that are due, in one transaction.
// Endpoints take turns, one job each per turn, and each endpoint's jobs
// come in due order, so one endpoint's backlog cannot hold back another's
// due jobs. Reading each endpoint's head costs one seek: the scan does not
// grow with the backlog.
func (s *Store) ClaimJobs(ctx context.Context, req ClaimRequest) (ClaimResult, error) {
	var res ClaimResult
	err := s.update(ctx, func(txn *badger.Txn) error {
		res = ClaimResult{}
		type head struct {
			endpoint string
			due      [][]byte  // keys of due jobs, in due order, at most allow
			next     time.Time // due time of the first job not in due; zero if none
			allow    int
		}
		var heads []*head
		var endpoints []string // with Since: every endpoint, in key order
		if req.Since != nil {
			if err := s.scanKeys(txn, endpointsPrefix(), func(k []byte) {
				endpoints = append(endpoints, string(k[len(prefixEndpoint):]))
			}); err != nil {
				return err
			}
		}
		func() {
			opts := badger.DefaultIteratorOptions
			opts.Prefix = jobsPendingPrefix()
			opts.PrefetchValues = false
			it := txn.NewIterator(opts)
			defer it.Close()
			// collect reads the due jobs of the endpoint from the
			// iterator's position.
			collect := func(endpoint string) {
				h := &head{endpoint: endpoint, allow: req.Max}
				if req.Allow != nil {
					h.allow = min(req.Allow(h.endpoint), req.Max)
				}
				prefix := endpointJobsPrefix(h.endpoint)
				for ; it.ValidForPrefix(prefix); it.Next() {
					due, _, ok := dueFromJobKey(it.Item().Key(), prefix)
					if !ok {
						continue
					}
					if due.After(req.Now) || len(h.due) >= h.allow {
						h.next = due
						break
					}
					h.due = append(h.due, it.Item().KeyCopy(nil))
				}
				heads = append(heads, h)
			}
			if req.Since != nil {
				for _, e := range endpoints {
					it.Seek(jobPendingKey(e, req.Since(e), ""))
					collect(e)
				}
				return
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
		}()
		// Round-robin, starting after the endpoint served first last time.
		start := 0
		for i, h := range heads {
			if h.endpoint > req.After {
				start = i
				break
			}
		}
		heads = append(heads[start:], heads[:start]...)
		var picked [][]byte
		taken := make([]int, len(heads))
		for progress := true; progress && len(picked) < req.Max; {
			progress = false
			for i, h := range heads {
				if taken[i] < len(h.due) && len(picked) < req.Max {
					picked = append(picked, h.due[taken[i]])
					taken[i]++
					progress = true
				}
			}
		}
		res.Pending = make(map[string]time.Time, len(heads))
		for i, h := range heads {
			first := h.next
			if taken[i] < len(h.due) {
				first, _, _ = dueFromJobKey(h.due[taken[i]], endpointJobsPrefix(h.endpoint))
			}
			res.Pending[h.endpoint] = first
			if taken[i] >= h.allow {
				continue // the endpoint may take no more now
			}
			next := h.next
			if taken[i] < len(h.due) {
				next = req.Now // due, but Max was reached
			}
			if !next.IsZero() && (res.NextDue.IsZero() || next.Before(res.NextDue)) {
				res.NextDue = next
			}
		}
		leaseUntil := req.Now.Add(req.LeaseFor)
		for _, key := range picked {
			var j jobRecord
			if err := getRecord(txn, key, &j); err != nil {
				return err
			}
			if err := txn.Delete(key); err != nil {
				return err
			}
			j.LeaseID, j.LeasedUntil = NewID(), leaseUntil
			if err := putRecord(txn, jobLeasedKey(j.ID), j); err != nil {
				return err
			}
			c := ClaimedJob{Job: j.job()}
			var ev eventRecord
			if err := getRecord(txn, eventKey(j.EventID), &ev); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			c.Payload = ev.Payload
			var er endpointRecord
			switch err := getRecord(txn, endpointKey(j.EndpointID), &er); {
			case err == nil:
				e := er.endpoint()
				c.Endpoint = &e
			case !errors.Is(err, ErrNotFound):
				return err
			}
			res.Jobs = append(res.Jobs, c)
		}
		return nil
	})
	if err != nil {
		return ClaimResult{}, fmt.Errorf("storage: claim jobs: %w", err)
	}
	return res, nil
}

// CompleteJob records a successful attempt: the job is done and its
// endpoint's delivery of the event is delivered.
func (s *Store) CompleteJob(ctx context.Context, j *Job, a Attempt) (*Event, error) {
	return s.finishJob(ctx, "complete", j, a, EventDelivered, time.Time{})
}

// RetryJob records a failed attempt after which another follows: the job
// is pending again, due at due, with one more attempt counted.
func (s *Store) RetryJob(ctx context.Context, j *Job, a Attempt, due time.Time) (*Event, error) {
	return s.finishJob(ctx, "retry", j, a, EventPending, due)
}

// ArchiveJob records an attempt after which no other follows: the job is
// done and its endpoint's delivery of the event failed permanently.
func (s *Store) ArchiveJob(ctx context.Context, j *Job, a Attempt) (*Event, error) {
	return s.finishJob(ctx, "archive", j, a, EventFailed, time.Time{})
}

// finishJob ends j's lease with attempt a, leaving the target with status
// (EventPending re-queues the job at due), and updates the event in the
// same transaction. ErrLeaseLost means j no longer holds its lease.
func (s *Store) finishJob(ctx context.Context, verb string, j *Job, a Attempt, status string, due time.Time) (*Event, error) {
	if !validIDs(j.ID, j.EventID, j.EndpointID) {
		return nil, fmt.Errorf("storage: %s job: %w", verb, ErrNotFound)
	}
	var ev eventRecord
	err := s.update(ctx, func(txn *badger.Txn) error {
		var cur jobRecord
		if err := getRecord(txn, jobLeasedKey(j.ID), &cur); errors.Is(err, ErrNotFound) {
			return ErrLeaseLost
		} else if err != nil {
			return err
		}
		if cur.LeaseID != j.LeaseID {
			return ErrLeaseLost
		}
		if err := txn.Delete(jobLeasedKey(j.ID)); err != nil {
			return err
		}
		if status == EventPending {
			next := jobRecord{ID: cur.ID, EventID: cur.EventID, EndpointID: cur.EndpointID, Round: cur.Round,
				Attempts: cur.Attempts + 1, Due: due.UTC()}
			if err := putRecord(txn, jobPendingKey(cur.EndpointID, next.Due, next.ID), next); err != nil {
				return err
			}
		}
		ev = eventRecord{}
		if err := getRecord(txn, eventKey(cur.EventID), &ev); errors.Is(err, ErrNotFound) {
			return nil // the event is gone; nothing to record
		} else if err != nil {
			return err
		}
		a.AttemptedAt = a.AttemptedAt.UTC().Truncate(time.Microsecond)
		ev.Attempts = append(ev.Attempts, a)
		old := ev.Status
		if cur.Round == ev.Round {
			for i := range ev.Targets {
				if ev.Targets[i].EndpointID == cur.EndpointID {
					ev.Targets[i].Status = status
				}
			}
			ev.Status = roundStatus(ev.Targets)
		}
		return putEvent(txn, &ev, old)
	})
	if err != nil {
		return nil, fmt.Errorf("storage: %s job: %w", verb, err)
	}
	e := ev.event()
	return &e, nil
}

// roundStatus is an event's status from its targets': pending while any is,
// then failed if any failed, else delivered.
func roundStatus(targets []EventTarget) string {
	status := EventDelivered
	for _, t := range targets {
		switch t.Status {
		case EventPending:
			return EventPending
		case EventFailed:
			status = EventFailed
		}
	}
	return status
}

// ReleaseJobs returns leased jobs whose attempt never started to pending,
// due when they were; no attempt is counted. A job whose lease was lost is
// skipped.
func (s *Store) ReleaseJobs(ctx context.Context, jobs []Job) error {
	err := s.update(ctx, func(txn *badger.Txn) error {
		for _, j := range jobs {
			if !validID(j.ID) {
				continue
			}
			var cur jobRecord
			if err := getRecord(txn, jobLeasedKey(j.ID), &cur); errors.Is(err, ErrNotFound) {
				continue
			} else if err != nil {
				return err
			}
			if cur.LeaseID != j.LeaseID {
				continue
			}
			if err := unlease(txn, &cur, cur.Due); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("storage: release jobs: %w", err)
	}
	return nil
}

// ReclaimJobs makes every job whose lease ended by expiredBy pending again,
// due at due, without counting an attempt: the attempt of a process that
// died, or of a worker that outlived its lease, is made again (at least
// once). It returns how many jobs it reclaimed.
func (s *Store) ReclaimJobs(ctx context.Context, expiredBy, due time.Time) (int, error) {
	n := 0
	err := s.update(ctx, func(txn *badger.Txn) error {
		n = 0
		var expired []jobRecord
		err := s.scan(txn, jobsLeasedPrefix(), func(_, v []byte) error {
			var j jobRecord
			if err := decode(v, &j); err != nil {
				return err
			}
			if !j.LeasedUntil.After(expiredBy) {
				expired = append(expired, j)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for i := range expired {
			if err := unlease(txn, &expired[i], due); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("storage: reclaim jobs: %w", err)
	}
	return n, nil
}

func unlease(txn *badger.Txn, j *jobRecord, due time.Time) error {
	if err := txn.Delete(jobLeasedKey(j.ID)); err != nil {
		return err
	}
	j.LeaseID, j.LeasedUntil, j.Due = "", time.Time{}, due.UTC()
	return putRecord(txn, jobPendingKey(j.EndpointID, j.Due, j.ID), j)
}

// scanKeys calls fn with every key under prefix, without reading values.
func (s *Store) scanKeys(txn *badger.Txn, prefix []byte, fn func(key []byte)) error {
	opts := badger.DefaultIteratorOptions
	opts.Prefix = prefix
	opts.PrefetchValues = false
	it := txn.NewIterator(opts)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		fn(it.Item().Key())
	}
	return nil
}

// ListJobs returns every pending job (by endpoint, then due time) and every
// leased job. It reads the whole queue: it is for tests and diagnostics.
func (s *Store) ListJobs(ctx context.Context) (pending, leased []Job, err error) {
	err = s.view(ctx, func(txn *badger.Txn) error {
		collect := func(out *[]Job) func(_, v []byte) error {
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
