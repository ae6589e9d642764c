// Package storage is rxgate's data model and the contracts its backends
// meet: the domain types (partners, organizations, their users, the users'
// patients and custom drugs, the patients' prescriptions, webhook endpoints,
// events and their delivery jobs), the sentinel errors, the id rules, the
// cursor codec, the event payload and round rules, and two interfaces: Store,
// the entity store the HTTP layer uses, and JobStore, the webhook outbox the
// queue uses.
//
// Backends live in subpackages (storage/badger is the embedded default) and
// prove that they meet the contracts by running the conformance suite in
// testsuite/storagetest from their own tests. Nothing of a backend leaks
// through these interfaces: callers see domain types and the sentinel
// errors below.
package storage

import (
	"context"
	"errors"
	"time"
)

// Sentinel errors. Every error a backend returns for these conditions wraps
// one of them; anything else is an internal failure.
var (
	// ErrNotFound reports that the addressed record, or one of its
	// ancestors, does not exist. An id that breaks the id rules (ValidID)
	// addresses nothing, so it is ErrNotFound too.
	ErrNotFound = errors.New("storage: not found")
	// ErrAlreadyExists reports a create that collides with an existing
	// record or unique index (an e-mail in an organization, a
	// partner_patient_id, a webhook URL of a partner).
	ErrAlreadyExists = errors.New("storage: already exists")
	// ErrConflict reports a transaction that kept conflicting with
	// concurrent writers after every retry.
	ErrConflict = errors.New("storage: conflict")
	// ErrBadCursor reports a lastKey that is malformed, altered, or issued
	// for another list.
	ErrBadCursor = errors.New("storage: invalid cursor")
	// ErrTooLarge reports a record over MaxRecordBytes. It is checked before
	// the backend sees the value, whose own error could quote the value's
	// bytes (patient data) into whatever logs it.
	ErrTooLarge = errors.New("storage: record too large")
	// ErrEventPending: the event is still being delivered (ReplayEvent).
	ErrEventPending = errors.New("storage: event is still being delivered")
	// ErrNotValidated: validate has not succeeded for the organization
	// (ReplayEvent).
	ErrNotValidated = errors.New("storage: organization not validated")
	// ErrNoEndpoints: the partner has no webhook endpoint (ReplayEvent).
	ErrNoEndpoints = errors.New("storage: partner has no webhook endpoint")
	// ErrUnavailable reports that the store cannot be reached now (a
	// database that is down or restarting); the operation may be tried
	// again later. Whether a write that failed so was committed is
	// unknown; it was not acknowledged.
	ErrUnavailable = errors.New("storage: unavailable")
	// ErrLeaseLost: the job is no longer leased under the lease presented
	// (it was released, reclaimed after it expired, or finished); its
	// result must be dropped.
	ErrLeaseLost = errors.New("storage: job lease lost")
)

// MaxRecordBytes bounds one stored record (its encoded form).
const MaxRecordBytes = 256 << 10

// Store is the entity store: everything the HTTP layer reads and writes.
// Implementations are safe for concurrent use. Methods that take an
// updater fn run it inside their transaction and may run it more than once
// when a concurrent writer conflicts, each time on a fresh read; an error
// from fn aborts the update and is returned as it is.
type Store interface {
	// Ping reports whether the store is open and readable.
	Ping(ctx context.Context) error
	// LoadOrCreateMeta returns the value stored under the internal name,
	// storing the result of create first when there is none; concurrent
	// callers all get the value stored first. It keeps the cursor key and
	// the built-in issuer's signing key.
	LoadOrCreateMeta(ctx context.Context, name string, create func() ([]byte, error)) ([]byte, error)

	// CreatePartner stores p, assigning an id (unless set) and the creation
	// time. ErrAlreadyExists means the id is taken.
	CreatePartner(ctx context.Context, p *Partner) error
	GetPartner(ctx context.Context, id string) (*Partner, error)
	// ListPartners returns every partner in id order.
	ListPartners(ctx context.Context) ([]Partner, error)
	// SetPartnerSecret replaces the partner's secret hash; the old secret
	// stops working when it returns.
	SetPartnerSecret(ctx context.Context, id string, hash []byte) (*Partner, error)

	// CreateOrganization stores o under its partner (ErrNotFound when the
	// partner does not exist), assigning an id (unless set) and the
	// creation time.
	CreateOrganization(ctx context.Context, o *Organization) error
	GetOrganization(ctx context.Context, id string) (*Organization, error)
	// ListOrganizations returns every organization in id order.
	ListOrganizations(ctx context.Context) ([]Organization, error)
	SetOrganizationSecret(ctx context.Context, id string, hash []byte) (*Organization, error)
	// ValidateOrganization marks the organization validated (spec 4.10,
	// 6.1); repeating it keeps the first validation time.
	ValidateOrganization(ctx context.Context, id string) (*Organization, error)

	// CreateUser stores u in its organization (ErrNotFound when it does not
	// exist), assigning an id (unless set) and times. The e-mail is unique
	// in the organization, ignoring case (ErrAlreadyExists).
	CreateUser(ctx context.Context, u *User) error
	GetUser(ctx context.Context, orgID, userID string) (*User, error)
	// GetMember returns an organization and one of its users read at one
	// point in time: what authenticating a partner request needs.
	GetMember(ctx context.Context, orgID, userID string) (*Organization, *User, error)
	// ListUsers returns one page of the organization's users in id order
	// (creation order for generated ids). ErrBadCursor means a lastKey not
	// issued for this organization's list.
	ListUsers(ctx context.Context, orgID string, req PageRequest) ([]User, PageInfo, error)
	// SetUserDisabled disables or enables a user (spec 3.2); a disable
	// records its time in DisabledAt, which an enable keeps. Both set the
	// role to member. changed is false, and nothing is written, when the
	// user already was in the requested state.
	SetUserDisabled(ctx context.Context, orgID, userID string, disabled bool) (u *User, changed bool, err error)

	// CreatePatient stores p under its user (ErrNotFound when the user does
	// not exist), assigning an id (unless set) and times. ErrAlreadyExists
	// means the id, or the partner_patient_id within the organization, is
	// taken.
	CreatePatient(ctx context.Context, p *Patient) error
	GetPatient(ctx context.Context, orgID, userID, patientID string) (*Patient, error)
	// UpdatePatient reads the patient, lets fn change it and writes the
	// result in one transaction. fn cannot change the ids, the
	// partner_patient_id or the creation time; UpdatedAt is set.
	UpdatePatient(ctx context.Context, orgID, userID, patientID string, fn func(*Patient) error) (*Patient, error)

	// CreatePrescription stores p for its patient (ErrNotFound when the
	// patient does not exist) after PrepareCreate, with the prescriber taken
	// from the patient's user, and writes its prescription.created event
	// and delivery jobs in the same transaction (NewPrescriptionCreated,
	// Event.StartRound): an uncommitted prescription is never announced and
	// a committed one never unannounced. ErrAlreadyExists means the scid is
	// taken in the organization.
	CreatePrescription(ctx context.Context, p *Prescription) error
	// UpdatePrescription reads the patient's prescription with scid, lets
	// fn change it and writes it back. fn cannot change the ids or the
	// creation time.
	UpdatePrescription(ctx context.Context, orgID, userID, patientID, scid string, fn func(*Prescription) error) (*Prescription, error)
	// ListPrescriptionsJSON returns the patient and appends one page of its
	// prescriptions to dst as a JSON array of the stored spec 2.5 objects,
	// newest first (ties by scid), copied as stored: it is what the
	// partner API serves. ErrNotFound means the patient does not exist;
	// ErrBadCursor a lastKey not issued for this patient's list.
	ListPrescriptionsJSON(ctx context.Context, orgID, userID, patientID string, req PageRequest, dst []byte) (*Patient, []byte, PageInfo, error)

	// CreateCustomDrugs stores drugs, each organization-level when its
	// UserID is empty and user-level otherwise, assigning ids (unless set).
	// The owning organization, and user for user-level drugs, must exist
	// (ErrNotFound). A backend may write them in several transactions; on
	// error, the drugs written before it stay and the error says how many.
	CreateCustomDrugs(ctx context.Context, drugs []CustomDrug) error
	// ListCustomDrugsJSON appends to dst a JSON array of the stored spec 2.4
	// objects (with custom_drug_id): the organization-level drugs, then the
	// user's own, each group in id order. It returns the count.
	// ErrNotFound means the user does not exist in the organization.
	ListCustomDrugsJSON(ctx context.Context, orgID, userID string, dst []byte) ([]byte, int, error)
	// UpdateCustomDrug reads the user's own drug, lets fn change it and
	// writes it back. An organization-level drug or another user's drug is
	// ErrNotFound.
	UpdateCustomDrug(ctx context.Context, orgID, userID, drugID string, fn func(*CustomDrug) error) (*CustomDrug, error)
	// DeleteCustomDrug removes the user's own drug (ErrNotFound as for
	// UpdateCustomDrug).
	DeleteCustomDrug(ctx context.Context, orgID, userID, drugID string) error

	// CreateWebhookEndpoint stores e for its partner (ErrNotFound when the
	// partner does not exist), assigning an id (unless set) and the creation
	// time. ErrAlreadyExists means the id, or the same URL for the same
	// partner, is taken: one URL registered twice would receive every event
	// twice.
	CreateWebhookEndpoint(ctx context.Context, e *WebhookEndpoint) error
	GetWebhookEndpoint(ctx context.Context, id string) (*WebhookEndpoint, error)
	// ListWebhookEndpoints returns the endpoints of the partner, or of every
	// partner when partnerID is "", in id order.
	ListWebhookEndpoints(ctx context.Context, partnerID string) ([]WebhookEndpoint, error)
	// DeleteWebhookEndpoint removes the endpoint. Jobs already queued for it
	// stay queued; their attempt records the endpoint as deleted.
	DeleteWebhookEndpoint(ctx context.Context, id string) error
	// RotateWebhookSecret makes secret the endpoint's signing secret
	// (WebhookEndpoint.Rotate).
	RotateWebhookSecret(ctx context.Context, id, secret string, graceUntil time.Time) (*WebhookEndpoint, error)
	// SetWebhookSignatureScheme changes how the endpoint's deliveries are
	// signed (SchemeRxgate or SchemeStandard); its secrets stay. An
	// unknown scheme is refused.
	SetWebhookSignatureScheme(ctx context.Context, id, scheme string) (*WebhookEndpoint, error)
	// DisableWebhookEndpoint disables the endpoint, saying why: its
	// pending jobs are held (no claim takes them) until it is enabled.
	// Disabling a disabled endpoint keeps the first time and reason.
	DisableWebhookEndpoint(ctx context.Context, id, reason string) (*WebhookEndpoint, error)
	// EnableWebhookEndpoint enables the endpoint and forgets its failing
	// streak: its held jobs are claimed again (the queues wake).
	EnableWebhookEndpoint(ctx context.Context, id string) (*WebhookEndpoint, error)
	// ReplayEventTo starts a new round of the event (Event.CheckReplay)
	// to the one endpoint, its job due at due: recovery replays an
	// endpoint's failed events paced this way. The endpoint must be one
	// of the event's partner's (ErrNotFound).
	ReplayEventTo(ctx context.Context, eventID, endpointID string, due time.Time) (*Event, error)

	// CreateTestEvent writes a webhook.test event to the endpoint
	// (NewWebhookTest) with its job, in one transaction; ErrNotFound when
	// the endpoint does not exist. It is delivered as any event is; it
	// cannot be replayed (its organization does not exist).
	CreateTestEvent(ctx context.Context, endpointID string) (*Event, error)

	GetEvent(ctx context.Context, id string) (*Event, error)
	// ListEvents returns one page of the events matching f, oldest first.
	// ErrBadCursor means a lastKey not issued for this filter.
	ListEvents(ctx context.Context, f EventFilter, req PageRequest) ([]Event, PageInfo, error)
	// ReplayEvent starts a new round of the event (Event.CheckReplay,
	// Event.StartRound) to every endpoint its partner has now.
	ReplayEvent(ctx context.Context, id string) (*Event, error)
	// PurgeEvents deletes the events created before cutoff that are no
	// longer pending (delivered, failed or skipped), with their payloads,
	// attempts and index entries, and returns how many it deleted. A
	// pending event is never deleted, however old. It works in batches: a
	// crash in the middle leaves whole events, deleted or kept.
	PurgeEvents(ctx context.Context, cutoff time.Time) (int, error)

	// CreateOperatorKey stores k, assigning an id (unless set) and the
	// creation time. ErrAlreadyExists means the id, or the name (revoked
	// keys' names included), is taken. The role is stored as given: the
	// caller checks it.
	CreateOperatorKey(ctx context.Context, k *OperatorKey) error
	// GetOperatorKey returns the key with id, revoked or not. It is read on
	// every request an operator key makes, so that a revocation holds at
	// once on every replica.
	GetOperatorKey(ctx context.Context, id string) (*OperatorKey, error)
	// ListOperatorKeys returns every key, revoked ones included, in id
	// order.
	ListOperatorKeys(ctx context.Context) ([]OperatorKey, error)
	// RevokeOperatorKey marks the key revoked; it stops working when this
	// returns. Revoking it again keeps the first revocation time.
	RevokeOperatorKey(ctx context.Context, id string) (*OperatorKey, error)

	// Count counts the organizations, the users and the events by status,
	// for the operator's overview. It reads no record's content. A backend
	// may count exactly only up to a bound and estimate above it, saying
	// so (Counts.Estimated), so that the count costs the same whatever the
	// store's size.
	Count(ctx context.Context) (Counts, error)
}

// Counts are what Store.Count counts.
type Counts struct {
	Organizations, Users int
	// Events has an entry for each of EventStatuses.
	Events map[string]int
	// Estimated says that one count or more is an estimate: PostgreSQL
	// counts exactly up to a bound (10,000) and estimates beyond it from
	// the database's statistics.
	Estimated bool
}

// JobStore is the webhook outbox: the delivery jobs that CreatePrescription
// and ReplayEvent queue, as the queue works them. Several queues, in one
// process or in several sharing one database, may work one JobStore at
// once; the store, not a queue's memory, keeps them from stepping on each
// other:
//
//	pending --ClaimJobs--> leased (owner, lease id, expiry)
//	leased --RecordOutcomes, delivered--> gone, target delivered
//	leased --RecordOutcomes, retry--> pending again, due later, one more attempt counted
//	leased --RecordOutcomes, failed--> gone, target failed (permanently)
//	leased --ReleaseJobs--> pending, due as before, no attempt counted
//	leased, expired --ReclaimExpired--> pending, due at once, no attempt counted
//	leased --RenewLeases--> leased longer
//
// A job is never anywhere else. A lease need not outlive its owner: a
// backend may keep leases where only their owners' process sees them (the
// embedded store keeps them in memory), so after a crash every job is
// pending again, which is what at least once needs.
type JobStore interface {
	// ClaimJobs leases up to req.Max jobs that are due by req.Now, in one
	// transaction. Endpoints take turns, one job each per turn, starting
	// after req.After, and each endpoint's jobs come in due order, so one
	// endpoint's backlog cannot hold back another's. No endpoint is left
	// with more than req.PerEndpoint leased jobs, counting every lease of
	// every owner that has not been reclaimed, except the claiming owner's
	// finished ones (req.Finished, ClaimRequest.AllowanceOf).
	ClaimJobs(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// RenewLeases extends the leases of jobs (as claimed) to until and
	// returns the ids of those whose lease was lost.
	RenewLeases(ctx context.Context, jobs []Job, until time.Time) (lost []string, err error)
	// RecordOutcomes records attempts: each outcome ends its job's lease
	// and commits the job's next state with the attempt on its event
	// (Event.RecordAttempt): done and delivered, done and failed
	// permanently, or pending again at RetryAt with one more attempt
	// counted. A backend records a batch in as few transactions as it can
	// (one sync for many attempts). The results are in the order of
	// outcomes; an outcome whose job no longer holds the lease presented
	// gets ErrLeaseLost and changes nothing, the others are recorded. The
	// error is for the batch: when it is not nil, nothing was recorded.
	RecordOutcomes(ctx context.Context, outcomes []Outcome) ([]Recorded, error)
	// ReleaseJobs returns leased jobs whose attempt never started to
	// pending, due when they were; no attempt is counted. A job whose lease
	// was lost is skipped.
	ReleaseJobs(ctx context.Context, jobs []Job) error
	// ReclaimExpired makes every job whose lease has expired by now pending
	// again, due at once (no later than now), without counting an attempt:
	// the attempt of a worker that died, or outlived its lease, is made
	// again (at least once). A live lease is never taken, nor one whose
	// outcome is being recorded. It returns how many jobs it took.
	ReclaimExpired(ctx context.Context, now time.Time) (int, error)
	// JobStats counts the pending and the leased jobs and gives the
	// earliest due time of a pending one, without reading the jobs
	// themselves: metrics read it at every scrape. As with Count, a
	// backend may count exactly only up to a bound and estimate beyond
	// it (JobStats.Estimated); OldestDue is exact.
	JobStats(ctx context.Context) (JobStats, error)
	// ListJobs returns every pending job (by endpoint, then due time) and
	// every leased job. It reads the whole queue: it is for diagnostics and
	// tests.
	ListJobs(ctx context.Context) (pending, leased []Job, err error)
	// WatchJobs returns a channel that receives, without ever blocking a
	// writer, after a commit that made jobs pending (a new event's, a
	// replay's, a retry's, a release or a reclaim), so that whoever writes
	// jobs wakes the queues; stop ends the watch.
	WatchJobs() (ch <-chan struct{}, stop func())
}

// JobHandoff is a JobStore that can hand the leases a batch of outcomes
// ends to the endpoints' next due jobs in the transaction that records
// them: a queue gets its next jobs without a claim of their own. A queue
// uses it when its store has it.
type JobHandoff interface {
	// RecordOutcomesHandoff is RecordOutcomes and, in the same
	// transaction, a claim for next.Owner limited to the endpoints whose
	// leases the recorded outcomes ended: each such endpoint may take, in
	// due order, jobs due by next.Now, at most as many as outcomes ended
	// its leases, within next.PerEndpoint counting every lease of every
	// owner (exactly, as ClaimJobs); no more than next.Max in all, the
	// endpoints taking turns as they do in a claim, and none for an
	// endpoint that is disabled (also by this batch). It never adds to an
	// endpoint's leases, so it need not wait for, nor be kept out by, a
	// claim of the same endpoint under way: handoffs and claims run side
	// by side. The caller must not have listed the jobs of these outcomes
	// as finished (ClaimRequest.Finished) in a claim: their places would
	// be given twice. next.After is not used. The jobs it leased come back
	// with the results; none when the error is not nil.
	RecordOutcomesHandoff(ctx context.Context, outcomes []Outcome, next ClaimRequest) ([]Recorded, []ClaimedJob, error)
}

// WriteLoad is a JobStore that tells how many synchronous writes (an
// API's creates, for one) are waiting for their commit at the moment:
// queued, in a batch being filled, or in the batch being synced. Writes
// that need not start a batch of their own (Badger's recorded outcomes)
// are not counted. A queue on such a store lets its deliveries pace with
// their outcome writes while many writes wait (ClaimRequest.Finished): a
// delivery then takes CPU time that those writes, whose callers wait for
// an answer, need.
type WriteLoad interface {
	WaitingWrites() int
}

// JobStats summarizes the queue (JobStore.JobStats).
type JobStats struct {
	Pending, Leased int
	// OldestDue is the earliest due time of a pending job; zero when none
	// is pending.
	OldestDue time.Time
	// Estimated says that a count is an estimate (see Store.Count).
	Estimated bool
}

// Backend is an opened store: both interfaces over one database, closed
// once, after everything that uses it has stopped.
type Backend interface {
	Store
	JobStore
	Close() error
}
