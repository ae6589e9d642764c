package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Events and their delivery jobs: the types, and the rules every backend
// applies the same way (the payload, when an event is skipped, how a round
// of delivery starts and ends, when a replay is allowed).
//
// An event is written in the transaction of the change it announces (today
// only CreatePrescription), together with one pending job per webhook
// endpoint of the organization's partner. The event keeps the exact body
// that is delivered and signed, its status and every attempt; a job is one
// endpoint's place in the delivery queue (JobStore).

// Event types.
const (
	// EventPrescriptionCreated is spec 6's prescription.created.
	EventPrescriptionCreated = "prescription.created"
	// EventWebhookTest is a test send (POST .../webhook-endpoints/{id}/test):
	// delivered, signed and retried as any event, to one endpoint, with no
	// organization.
	EventWebhookTest = "webhook.test"
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
	// ErrorClass sorts the failure for debugging (one of the
	// AttemptClass values); "" when the attempt delivered cleanly.
	ErrorClass string `json:"error_class,omitempty"`
	// Signature is the signature header's value as sent; it holds
	// HMACs, never a secret.
	Signature string `json:"signature,omitempty"`
	// SecretIDs name the endpoint's secrets that signed it (SecretID),
	// in the order of the header's signatures.
	SecretIDs []string `json:"secret_ids,omitempty"`
	// AttemptDetail is what the endpoint answered, bounded
	// (BoundAttemptDetail); only the newest MaxDetailedAttempts attempts
	// of an event keep it.
	AttemptDetail
}

// AttemptDetail is the part of an attempt kept for debugging only: the
// answer's headers and the start of its body.
type AttemptDetail struct {
	// ResponseHeaders are the answer's headers as name and value pairs,
	// in the order received: at most MaxAttemptHeaders of them and
	// MaxAttemptHeaderBytes in all.
	ResponseHeaders [][2]string `json:"response_headers,omitempty"`
	// HeadersTruncated says that headers were left out.
	HeadersTruncated bool `json:"headers_truncated,omitempty"`
	// ResponseBody is the first MaxAttemptBodyBytes of the answer's body.
	ResponseBody []byte `json:"response_body,omitempty"`
	// BodyTruncated says that the body was longer.
	BodyTruncated bool `json:"body_truncated,omitempty"`
}

// Error classes of an attempt (Attempt.ErrorClass).
const (
	AttemptDNS          = "dns"
	AttemptConnect      = "connect"
	AttemptTLS          = "tls"
	AttemptTimeout      = "timeout"
	AttemptHTTPStatus   = "http_status"
	AttemptBodyTooLarge = "body_too_large"
	// AttemptRefused: the address was not one deliveries may connect to,
	// or the URL is no longer allowed.
	AttemptRefused = "refused"
	// AttemptNetwork: any other failure of the connection.
	AttemptNetwork = "network"
	// AttemptGone: the endpoint or the event was deleted.
	AttemptGone = "gone"
)

// AttemptClasses lists every error class.
var AttemptClasses = []string{AttemptDNS, AttemptConnect, AttemptTLS, AttemptTimeout, AttemptHTTPStatus,
	AttemptBodyTooLarge, AttemptRefused, AttemptNetwork, AttemptGone}

// Bounds of what an attempt keeps, so that an event's record stays well
// under MaxRecordBytes however its endpoints answer: at most
// MaxDetailedAttempts × (a body, base64 in JSON, plus headers escaped).
const (
	MaxAttemptBodyBytes   = 4 << 10
	MaxAttemptHeaders     = 32
	MaxAttemptHeaderBytes = 2 << 10
	MaxDetailedAttempts   = 5
	maxSignatureBytes     = 512
)

// BoundAttemptDetail keeps of an answer's headers and body what an
// attempt may hold: the first MaxAttemptBodyBytes of body (truncated
// tells that there was more), and headers in the order given up to
// MaxAttemptHeaders and MaxAttemptHeaderBytes of names and values.
func BoundAttemptDetail(headers [][2]string, body []byte, truncated bool) AttemptDetail {
	var d AttemptDetail
	size := 0
	for _, h := range headers {
		n := len(h[0]) + len(h[1])
		if len(d.ResponseHeaders) == MaxAttemptHeaders || size+n > MaxAttemptHeaderBytes {
			d.HeadersTruncated = true
			continue
		}
		size += n
		d.ResponseHeaders = append(d.ResponseHeaders, h)
	}
	if len(body) > MaxAttemptBodyBytes {
		body, truncated = body[:MaxAttemptBodyBytes], true
	}
	if len(body) > 0 {
		d.ResponseBody = slices.Clone(body)
	}
	d.BodyTruncated = truncated
	return d
}

// SecretID names a webhook secret without revealing it: "whk_" and the
// first 12 hex digits of a SHA-256 of the secret under a fixed label. It
// is stable across rotations (it names that secret, not a position), so
// an attempt's SecretIDs can be matched against an endpoint's
// secret_id and previous_secret_id later.
func SecretID(secret string) string {
	h := sha256.Sum256([]byte("rxgate webhook secret id\x00" + secret))
	return "whk_" + hex.EncodeToString(h[:6])
}

// EventFilter narrows ListEvents; an empty member matches everything.
type EventFilter struct {
	// PartnerID narrows the list to one partner's events, in the store:
	// a page's count, offset and hasNext are positions in that partner's
	// events alone (a partner:<id> operator key lists with it set).
	PartnerID      string
	OrganizationID string
	// Status is one of EventStatuses.
	Status string
}

// Matchable reports whether any event can match f: a status that is not
// one of EventStatuses, or a partner or organization id that breaks the id
// rules, matches nothing.
func (f EventFilter) Matchable() bool {
	return (f.PartnerID == "" || ValidID(f.PartnerID)) &&
		(f.OrganizationID == "" || ValidID(f.OrganizationID)) &&
		(f.Status == "" || slices.Contains(EventStatuses, f.Status))
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

// NewPrescriptionCreated returns the prescription.created event of p, a
// prescription of the patient with partnerPatientID in org, created at now,
// before its first round starts (StartRound).
func NewPrescriptionCreated(p *Prescription, partnerPatientID string, org *Organization, now time.Time) (*Event, error) {
	now = Timestamp(now)
	e := &Event{
		ID: NewIDAt(now), Type: EventPrescriptionCreated, OrganizationID: org.ID, PartnerID: org.PartnerID, CreatedAt: now, Round: 1,
	}
	payload, err := json.Marshal(EventPayload{
		EventType: e.Type, EventID: e.ID, Timestamp: now.Format(eventTimestampLayout),
		PartnerID: e.PartnerID, OrganizationID: e.OrganizationID,
		Data: PrescriptionCreatedData{PatientID: p.PatientID, PartnerPatientID: partnerPatientID, UserID: p.UserID, SCID: p.SCID},
	})
	if err != nil {
		return nil, fmt.Errorf("storage: encode event: %w", err)
	}
	e.Payload = payload
	return e, nil
}

// WebhookTestData is the data of webhook.test.
type WebhookTestData struct {
	EndpointID string `json:"endpoint_id"`
	Message    string `json:"message"`
}

// webhookTestPayload is webhook.test's body: the envelope of spec 6.2
// without an organization.
type webhookTestPayload struct {
	EventType string          `json:"event_type"`
	EventID   string          `json:"event_id"`
	Timestamp string          `json:"timestamp"`
	PartnerID string          `json:"partner_id"`
	Data      WebhookTestData `json:"data"`
}

// NewWebhookTest returns a webhook.test event to endpoint ep created at
// now, with its one pending job: the caller writes both in one
// transaction. It belongs to no organization.
func NewWebhookTest(ep *WebhookEndpoint, now time.Time) (*Event, []Job, error) {
	now = Timestamp(now)
	e := &Event{ID: NewIDAt(now), Type: EventWebhookTest, PartnerID: ep.PartnerID, CreatedAt: now, Round: 1}
	payload, err := json.Marshal(webhookTestPayload{
		EventType: e.Type, EventID: e.ID, Timestamp: now.Format(eventTimestampLayout), PartnerID: e.PartnerID,
		Data: WebhookTestData{EndpointID: ep.ID, Message: "A test send from rxgate: verify its signature as any delivery's."},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("storage: encode event: %w", err)
	}
	e.Payload = payload
	return e, e.StartRound(true, []string{ep.ID}, now), nil
}

// StartRound begins e's current round: one pending job per endpoint,
// due at now, each endpoint a pending target. When validate has not
// succeeded for the organization, or the partner has no endpoint, e is
// skipped instead (spec 6.1) and no job is returned. The caller writes e
// and the jobs in one transaction.
func (e *Event) StartRound(validated bool, endpointIDs []string, now time.Time) []Job {
	e.Targets, e.SkipReason = nil, ""
	switch {
	case !validated:
		e.Status, e.SkipReason = EventSkipped, SkipNotValidated
		return nil
	case len(endpointIDs) == 0:
		e.Status, e.SkipReason = EventSkipped, SkipNoEndpoints
		return nil
	}
	e.Status = EventPending
	now = Timestamp(now)
	jobs := make([]Job, len(endpointIDs))
	for i, id := range endpointIDs {
		jobs[i] = Job{ID: NewID(), EventID: e.ID, EndpointID: id, Round: e.Round, Due: now}
		e.Targets = append(e.Targets, EventTarget{EndpointID: id, Status: EventPending})
	}
	return jobs
}

// CheckReplay says whether a new round of e may start now: not while it is
// pending (ErrEventPending), not before validate (ErrNotValidated), not to
// no endpoint (ErrNoEndpoints). When it may, it counts the new round; the
// caller then calls StartRound.
func (e *Event) CheckReplay(validated bool, endpoints int) error {
	switch {
	case e.Status == EventPending:
		return ErrEventPending
	case !validated:
		return ErrNotValidated
	case endpoints == 0:
		return ErrNoEndpoints
	}
	e.Round++
	return nil
}

// RecordAttempt records attempt a of job j on e: the attempt is kept and,
// when j belongs to e's current round, j's endpoint's target takes status
// (EventPending while it is retried, EventDelivered or EventFailed) and e
// takes the round's status: pending while any target is, then failed if
// any failed, else delivered. A job of an earlier round changes neither.
func (e *Event) RecordAttempt(j *Job, a Attempt, status string) {
	a.AttemptedAt = Timestamp(a.AttemptedAt)
	if len(a.Signature) > maxSignatureBytes {
		a.Signature = a.Signature[:maxSignatureBytes]
	}
	e.Attempts = append(e.Attempts, a)
	// Only the newest attempts keep their answer's detail: an event
	// replayed many times stays a bounded record.
	if n := len(e.Attempts) - MaxDetailedAttempts - 1; n >= 0 {
		e.Attempts[n].AttemptDetail = AttemptDetail{}
	}
	if j.Round != e.Round {
		return
	}
	for i := range e.Targets {
		if e.Targets[i].EndpointID == j.EndpointID {
			e.Targets[i].Status = status
		}
	}
	e.Status = EventDelivered
	for _, t := range e.Targets {
		switch t.Status {
		case EventPending:
			e.Status = EventPending
			return
		case EventFailed:
			e.Status = EventFailed
		}
	}
}

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
	// The lease, set while the job is leased: its owner (ClaimRequest.Owner),
	// its id, which the finishing operations must present, and when it
	// expires.
	Owner       string
	LeaseID     string
	LeasedUntil time.Time
}

// ClaimedJob is a leased job with what its attempt needs.
type ClaimedJob struct {
	Job
	// Payload is the event's body; nil when the event is gone.
	Payload []byte
	// Endpoint is nil when the endpoint was deleted after the job was
	// queued.
	Endpoint *WebhookEndpoint
}

// Outcome is what one attempt of a claimed job leads to, for
// JobStore.RecordOutcomes.
type Outcome struct {
	// Job is the job as claimed: its lease id must still hold.
	Job     Job
	Attempt Attempt
	// Next is EventDelivered or EventFailed (the job is done), or
	// EventPending: it is attempted again at RetryAt.
	Next    string
	RetryAt time.Time
	// DisableAfter is how long the endpoint's every attempt may fail
	// before it is disabled (storage/health.go); 0: never.
	DisableAfter time.Duration
}

// Recorded is what RecordOutcomes made of one outcome.
type Recorded struct {
	// Event is the event after the attempt was recorded; nil when the
	// event is gone or Err is set.
	Event *Event
	// Err is ErrLeaseLost when the job no longer held its lease.
	Err error
	// Disabled is the endpoint, when recording this outcome disabled it
	// (set on the first outcome of the endpoint in the batch).
	Disabled *WebhookEndpoint
}

// ClaimRequest says which jobs ClaimJobs may lease.
type ClaimRequest struct {
	// Owner names the claimer (a queue); it is kept with each lease.
	Owner string
	// Now is the time jobs must be due by, and the lease's start.
	Now time.Time
	// LeaseFor is how long a lease lasts unless renewed.
	LeaseFor time.Duration
	// Max is the most jobs to lease.
	Max int
	// PerEndpoint is the most jobs one endpoint may have leased at once,
	// by every owner together, once the claim is done; 0 sets no limit
	// beyond Max.
	PerEndpoint int
	// Finished lists, per endpoint, the ids of the jobs the claiming owner
	// leases whose attempt has ended and whose outcome is on its way to
	// RecordOutcomes. They keep their leases, so that nobody else takes
	// them, but are no attempts in flight: PerEndpoint does not count them
	// (ClaimRequest.AllowanceOf). Nil lists none. Ids, not counts: the
	// list is taken before the claim, and an outcome recorded meanwhile
	// ends its lease; a store shared by several owners uncounts only the
	// listed jobs still leased, so that no owner's stale list lets the
	// endpoint's attempts in flight, over every owner, pass PerEndpoint.
	Finished map[string][]string
	// After is the endpoint of the last job the previous claim returned:
	// the turns start with the endpoint after it.
	After string
}

// ClaimResult is what ClaimJobs leased.
type ClaimResult struct {
	// Jobs are in the order the turns gave them.
	Jobs []ClaimedJob
	// NextDue is the earliest due time among the jobs left pending whose
	// endpoint may take more; zero when there are none.
	NextDue time.Time
}
