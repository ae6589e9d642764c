package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// TestClaimsProceedBesideAHeldEndpoint: a transaction holds endpoint a's
// claim slot, as a claim of another replica does between its statements
// (or one cut off in the middle of its claim), and has leased two of a's
// jobs without committing. Claims for endpoint b go on meanwhile, not
// waiting for it: no lock in the claim path is shared by every endpoint.
// They take none of a's jobs, whose leases they cannot see yet, so a's
// limit holds; once the holder commits, its leases count against a's
// limit for every claim.
func TestClaimsProceedBesideAHeldEndpoint(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, postgres.Options{})
	ctx := t.Context()
	w := storagetest.NewWorld(t, s)
	a := w.Endpoint(t, s, "https://a.example/hook")
	b := w.Endpoint(t, s, "https://b.example/hook")
	for i := range 3 {
		rx := w.Prescription()
		rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", i), Quantity: "1"}
		require.NoError(t, s.CreatePrescription(ctx, &rx))
	}
	const limit = 2

	holder := holdSlot(t, s, a.ID)
	tag, err := holder.Exec(ctx, `UPDATE jobs SET owner = 'holder', lease_id = id, leased_until = now() + interval '1 minute'
		WHERE id IN (SELECT id FROM jobs WHERE endpoint_id = $1 ORDER BY due, id LIMIT $2)`, a.ID, limit)
	require.NoError(t, err)
	require.EqualValues(t, limit, tag.RowsAffected())

	// The claims' own deadline is far away: one that waited for the
	// holder would fail the test with an error, not by a timing.
	claim := func(owner string) storage.ClaimResult {
		t.Helper()
		res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: owner, Now: time.Now(), LeaseFor: time.Minute, Max: 10, PerEndpoint: limit})
		require.NoError(t, err)
		return res
	}
	one := claim("q1")
	require.Equal(t, map[string]int{b.ID: limit}, byEndpoint(one.Jobs), "b's claims go on while a's slot is held, and take none of a's jobs")
	require.False(t, one.NextDue.IsZero(), "a has due jobs this claim skipped: the queue looks again soon")
	require.Empty(t, claim("q2").Jobs, "b is at its limit; a is still held")

	require.NoError(t, holder.Commit(ctx))
	res := claim("q3")
	require.Empty(t, res.Jobs, "a's two leases, committed by the holder, fill its limit")
	require.True(t, res.NextDue.IsZero(), "no endpoint may take more")
	pending, leased, err := s.ListJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	perEndpoint := map[string]int{}
	for _, j := range leased {
		perEndpoint[j.EndpointID]++
	}
	require.Equal(t, map[string]int{a.ID: limit, b.ID: limit}, perEndpoint)
}

func byEndpoint(js []storage.ClaimedJob) map[string]int {
	out := map[string]int{}
	for _, j := range js {
		out[j.EndpointID]++
	}
	return out
}

// roundTrips is a pgx tracer that counts the round trips of the calls
// made with a context it marked (measure): each statement sent on its
// own (BEGIN and COMMIT of a pgx.Tx among them), each batch and each
// prepare. The store's own goroutines (the notifier) are not counted.
type roundTrips struct {
	quietTracer
	mu   sync.Mutex
	sent []string
}

type measured struct{}

func (r *roundTrips) add(ctx context.Context, what string) {
	if ctx.Value(measured{}) == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, what)
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(ctx, d.SQL)
	return ctx
}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	r.add(ctx, fmt.Sprintf("a batch of %d", d.Batch.Len()))
	return ctx
}
func (r *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	r.add(ctx, "prepare "+d.SQL)
	return ctx
}

// measure runs fn with a marked context and returns what it sent.
func (r *roundTrips) measure(t *testing.T, fn func(ctx context.Context)) []string {
	t.Helper()
	r.mu.Lock()
	r.sent = nil
	r.mu.Unlock()
	fn(context.WithValue(t.Context(), measured{}, true))
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent
}

// TestRoundTrips counts, with a pgx tracer, the round trips of the hot
// paths once the connection's statement cache is warm (one connection,
// each path run once before): a create (prescription, event and jobs)
// one, on the basis the process remembers (issue 28: at most three; two
// without a basis, three on a stale one: TestCreateBasisChecked), audited
// or not, a page one (at most two), a claim three, and recording outcomes
// two, however many, also when it hands their places over.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	tr := &roundTrips{}
	s := openPostgres(t, postgres.WithTracer(postgres.Options{MaxConns: 1}, tr))
	w := storagetest.NewWorld(t, s)
	w.Endpoint(t, s, "https://a.example/hook")
	w.Endpoint(t, s, "https://b.example/hook")
	n := 0
	create := func(ctx context.Context) {
		n++
		rx := w.Prescription()
		rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", n), Quantity: "1"}
		require.NoError(t, s.CreatePrescription(ctx, &rx))
	}
	page := func(ctx context.Context) {
		_, _, _, err := s.ListPrescriptionsJSON(ctx, w.Organization.ID, w.User.ID, w.Patient.ID, storage.PageRequest{Limit: 2}, nil)
		require.NoError(t, err)
	}
	var claimed []storage.ClaimedJob
	claim := func(max int) func(ctx context.Context) {
		return func(ctx context.Context) {
			res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: "q", Now: time.Now(), LeaseFor: time.Minute, Max: max})
			require.NoError(t, err)
			require.Len(t, res.Jobs, max)
			claimed = res.Jobs
		}
	}
	auditedCreate := func(ctx context.Context) {
		create(storage.WithAudit(ctx, &storage.AuditPending{Entry: storage.AuditEntry{ActorKind: storage.AuditActorOperator,
			OperatorName: "ops", OperatorRole: "admin", Operation: "prescription.create", Time: time.Now()}}))
	}
	handoff := func(ctx context.Context) {
		// Every claimed lease ends; the endpoints' next due jobs are
		// handed over.
		outcomes := make([]storage.Outcome, len(claimed))
		for i, j := range claimed {
			outcomes[i] = storage.Outcome{Job: j.Job, Attempt: storage.Attempt{EndpointID: j.EndpointID, StatusCode: 200}, Next: storage.EventDelivered}
		}
		recs, handed, err := s.RecordOutcomesHandoff(ctx, outcomes, storage.ClaimRequest{Owner: "q", Now: time.Now(), LeaseFor: time.Minute, Max: len(outcomes)})
		require.NoError(t, err)
		for _, r := range recs {
			require.NoError(t, r.Err)
		}
		require.NotEmpty(t, handed)
		claimed = handed
	}
	record := func(ctx context.Context) {
		outcomes := make([]storage.Outcome, len(claimed))
		for i, j := range claimed {
			next := storage.EventDelivered
			if i%2 == 1 {
				next = storage.EventPending // half retried, half done
			}
			outcomes[i] = storage.Outcome{Job: j.Job, Attempt: storage.Attempt{EndpointID: j.EndpointID, StatusCode: 200},
				Next: next, RetryAt: time.Now().Add(time.Hour)}
		}
		recs, err := s.RecordOutcomes(ctx, outcomes)
		require.NoError(t, err)
		for _, r := range recs {
			require.NoError(t, r.Err)
		}
	}
	// Warm the statement cache: a statement's first use on a connection
	// is prepared first.
	for range 4 {
		create(t.Context())
	}
	page(t.Context())
	claim(1)(t.Context())
	record(t.Context())
	auditedCreate(t.Context())
	claim(2)(t.Context())
	handoff(t.Context())
	record(t.Context())

	for _, c := range []struct {
		name string
		fn   func(context.Context)
		want int
	}{
		{"create", create, 1},
		{"page", page, 1},
		{"claim of 1", claim(1), 3},
		{"record 1 outcome", record, 2},
		{"claim of 4", claim(4), 3},
		{"record 4 outcomes", record, 2},
		{"audited create", auditedCreate, 1},
		{"claim of 2", claim(2), 3},
		{"record 2 outcomes, hand 2 jobs over", handoff, 2},
	} {
		got := tr.measure(t, c.fn)
		require.Len(t, got, c.want, "%s: round trips %q", c.name, got)
	}
}

// TestClaimWritesAMissingSlot: jobs whose endpoint has no claim slot (no
// write of this build makes them, but a table restored or edited by hand
// could) are not lost: the claim that finds them writes the slot and asks to be
// called again soon, and the next claim takes them.
func TestClaimWritesAMissingSlot(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, postgres.Options{})
	ctx := t.Context()
	w := storagetest.NewWorld(t, s)
	a := w.Endpoint(t, s, "https://a.example/hook")
	rx := w.Prescription()
	require.NoError(t, s.CreatePrescription(ctx, &rx))
	_, err := s.Pool().Exec(ctx, `DELETE FROM claim_slots`)
	require.NoError(t, err)

	req := storage.ClaimRequest{Owner: "q", Now: time.Now(), LeaseFor: time.Minute, Max: 10}
	first, err := s.ClaimJobs(ctx, req)
	require.NoError(t, err)
	require.Empty(t, first.Jobs)
	require.False(t, first.NextDue.IsZero(), "due jobs were left: the queue looks again soon")
	second, err := s.ClaimJobs(ctx, req)
	require.NoError(t, err)
	require.Equal(t, map[string]int{a.ID: 1}, byEndpoint(second.Jobs))
}

// TestHandoffInTheOutcomesTransaction: the job an outcome's freed lease
// is handed to is leased by the transaction that records the outcome (its
// row and the event's carry that transaction's id). A handoff takes no
// claim slot: while another transaction holds the slot, the outcome is
// recorded without waiting for it and still hands its place on, one job
// for the one lease it ended, and the limit holds.
func TestHandoffInTheOutcomesTransaction(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, postgres.Options{})
	ctx := t.Context()
	a := endpointWithJobs(t, s, 4)
	const limit = 2
	next := storage.ClaimRequest{Owner: "q", Now: time.Now(), LeaseFor: time.Minute, Max: 10, PerEndpoint: limit}
	res, err := s.ClaimJobs(ctx, next)
	require.NoError(t, err)
	require.Len(t, res.Jobs, limit)
	outcome := func(j storage.ClaimedJob) []storage.Outcome {
		return []storage.Outcome{{Job: j.Job, Attempt: storage.Attempt{EndpointID: a.ID, StatusCode: 200, AttemptedAt: time.Now()}, Next: storage.EventDelivered}}
	}

	rec, handed, err := s.RecordOutcomesHandoff(ctx, outcome(res.Jobs[0]), next)
	require.NoError(t, err)
	require.NoError(t, rec[0].Err)
	require.Len(t, handed, 1)
	var jobTx, eventTx string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT xmin::text FROM jobs WHERE id = $1`, handed[0].ID).Scan(&jobTx))
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT xmin::text FROM events WHERE id = $1`, res.Jobs[0].EventID).Scan(&eventTx))
	require.Equal(t, eventTx, jobTx, "the handed job was leased by the transaction that recorded the outcome")

	holder := holdSlot(t, s, a.ID)
	// The store's own deadline bounds an outcome that waited for the
	// holder: it would fail with an error, not by a timing.
	rec, handed, err = s.RecordOutcomesHandoff(ctx, outcome(res.Jobs[1]), next)
	require.NoError(t, err)
	require.NoError(t, rec[0].Err)
	require.Len(t, handed, 1, "the slot is held: its place handed on all the same, nothing waited for")
	require.NoError(t, holder.Rollback(ctx))

	_, leased, err := s.ListJobs(ctx)
	require.NoError(t, err)
	require.Len(t, leased, limit, "the two handed jobs' leases")
	res, err = s.ClaimJobs(ctx, next)
	require.NoError(t, err)
	require.Empty(t, res.Jobs, "the limit: the handed leases fill it")
}

// TestClaimLeavesAFullEndpointsSlot: a claim does not lock the slot of an
// endpoint that has its limit of leases: it could take nothing there, and
// the slot stays free for the outcomes that hand their places over. Here
// another transaction holds the full endpoint's slot, as a recording
// batch does; the claim neither waits for it nor counts the endpoint as
// skipped (which would ask the queue to look again soon): nothing may be
// claimed until a lease ends.
func TestClaimLeavesAFullEndpointsSlot(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, postgres.Options{})
	ctx := t.Context()
	a := endpointWithJobs(t, s, 3)
	const limit = 2
	req := storage.ClaimRequest{Owner: "q", Now: time.Now(), LeaseFor: time.Minute, Max: 10, PerEndpoint: limit}
	res, err := s.ClaimJobs(ctx, req)
	require.NoError(t, err)
	require.Len(t, res.Jobs, limit)

	holdSlot(t, s, a.ID)
	res, err = s.ClaimJobs(ctx, req)
	require.NoError(t, err)
	require.Empty(t, res.Jobs)
	require.True(t, res.NextDue.IsZero(), "a is full: not skipped for its held slot, nothing to look at again")
}

// TestFinishedListStaleSinceRecorded: the claiming owner lists its
// finished jobs before the claim, and an outcome recorded meanwhile ends
// one's lease. That job is neither leased nor uncounted, so another
// owner's attempt in flight still counts and the limit holds over every
// owner: uncounting the list's length would let one job more through.
func TestFinishedListStaleSinceRecorded(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, postgres.Options{})
	ctx := t.Context()
	endpointWithJobs(t, s, 5)
	const limit = 2
	now := time.Now()
	claim := func(owner string, max int, finished map[string][]string) []storage.ClaimedJob {
		t.Helper()
		res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: owner, Now: now, LeaseFor: time.Minute, Max: max, PerEndpoint: limit, Finished: finished})
		require.NoError(t, err)
		return res.Jobs
	}
	q1 := claim("q1", 10, nil)
	require.Len(t, q1, limit)
	// q1 attempted both; the first one's outcome is recorded.
	rec, err := s.RecordOutcomes(ctx, []storage.Outcome{{Job: q1[0].Job,
		Attempt: storage.Attempt{EndpointID: q1[0].EndpointID, StatusCode: 200, AttemptedAt: now}, Next: storage.EventDelivered}})
	require.NoError(t, err)
	require.NoError(t, rec[0].Err)
	// q2 takes the place it freed and attempts it.
	require.Len(t, claim("q2", 10, nil), 1)
	// q1 claims with the list it took before its recording: one place is
	// free (q1's second job is finished, q2's is in flight), not two.
	ep := q1[0].EndpointID
	got := claim("q1", 10, map[string][]string{ep: {q1[0].ID, q1[1].ID}})
	require.Len(t, got, 1, "q2's attempt in flight still counts")
}

// endpointWithJobs registers an endpoint for a new world's partner and
// creates n prescriptions there, one job each.
func endpointWithJobs(t *testing.T, s *postgres.Store, n int) storage.WebhookEndpoint {
	t.Helper()
	w := storagetest.NewWorld(t, s)
	a := w.Endpoint(t, s, "https://a.example/hook")
	for i := range n {
		rx := w.Prescription()
		rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", i), Quantity: "1"}
		require.NoError(t, s.CreatePrescription(t.Context(), &rx))
	}
	return a
}

// holdSlot begins a transaction that holds endpointID's claim slot, as a
// claim or a recording batch does; it is rolled back at the test's end
// if the test has not ended it.
func holdSlot(t *testing.T, s *postgres.Store, endpointID string) pgx.Tx {
	t.Helper()
	return lockRow(t, s, `SELECT endpoint_id FROM claim_slots WHERE endpoint_id = $1 FOR UPDATE`, endpointID)
}

// lockRow begins a transaction that locks the row query (one id, $1)
// selects; it is rolled back at the test's end if the test has not ended
// it.
func lockRow(t *testing.T, s *postgres.Store, query, id string) pgx.Tx {
	t.Helper()
	ctx := t.Context()
	holder, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(context.Background()) })
	var got string
	require.NoError(t, holder.QueryRow(ctx, query, id).Scan(&got))
	return holder
}

// quietTracer is a pgx tracer that does nothing: the tracers of these
// tests embed it and trace what they need.
type quietTracer struct{}

func (quietTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (quietTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (quietTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (quietTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (quietTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (quietTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	return ctx
}
func (quietTracer) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// TestHandoffPassesOverJobsBeingLeased: a handoff passes over the pending
// jobs another transaction has locked (another handoff taking them, or a
// claim's UPDATE) and hands the next due one, without waiting: handoffs
// of one endpoint run side by side, each with jobs of its own. The
// store's lock timeout bounds a handoff that waited for the row: it would
// fail with an error, not by a timing.
func TestHandoffPassesOverJobsBeingLeased(t *testing.T) {
	t.Parallel()
	s := openPostgres(t, postgres.Options{LockTimeout: 5 * time.Second})
	ctx := t.Context()
	a := endpointWithJobs(t, s, 4)
	next := storage.ClaimRequest{Owner: "q", Now: time.Now(), LeaseFor: time.Minute, Max: 10, PerEndpoint: 2}
	res, err := s.ClaimJobs(ctx, next)
	require.NoError(t, err)
	require.Len(t, res.Jobs, 2)
	pending, _, err := s.ListJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 2)

	lockRow(t, s, `SELECT id FROM jobs WHERE id = $1 FOR UPDATE`, pending[0].ID)

	rec, handed, err := s.RecordOutcomesHandoff(ctx, []storage.Outcome{{Job: res.Jobs[0].Job,
		Attempt: storage.Attempt{EndpointID: a.ID, StatusCode: 200, AttemptedAt: time.Now()}, Next: storage.EventDelivered}}, next)
	require.NoError(t, err)
	require.NoError(t, rec[0].Err)
	require.Len(t, handed, 1)
	require.Equal(t, pending[1].ID, handed[0].ID, "the locked job is passed over for the next due one")
}

// leaseFirst is a pgx tracer that, once armed, leases the first job a
// claim's lease statement is about to take, from another connection,
// just before the claim sends it: as a handoff beside the claim would,
// since a handoff takes no claim slot.
type leaseFirst struct {
	quietTracer
	pool  atomic.Pointer[pgxpool.Pool]
	armed atomic.Bool
	taken atomic.Pointer[string]
	err   atomic.Pointer[error]
}

func (l *leaseFirst) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		if !strings.Contains(q.SQL, "UPDATE jobs SET owner = $1") || !l.armed.CompareAndSwap(true, false) {
			continue
		}
		id := q.Arguments[2].([]string)[0]
		_, err := l.pool.Load().Exec(context.Background(),
			`UPDATE jobs SET owner = 'beside', lease_id = 'beside-lease', leased_until = now() + interval '1 minute' WHERE id = $1`, id)
		l.taken.Store(&id)
		l.err.Store(&err)
	}
	return ctx
}

// TestClaimTakesOneFewerWhenItsJobIsLeasedBeside: a claim reads its
// endpoint's heads under the slot without locking them, and a handoff,
// which takes no slot, may lease one of them before the claim's UPDATE.
// That UPDATE re-checks: the claim takes one fewer and never takes over
// the lease made beside it.
func TestClaimTakesOneFewerWhenItsJobIsLeasedBeside(t *testing.T) {
	t.Parallel()
	tr := &leaseFirst{}
	s := openPostgres(t, postgres.WithTracer(postgres.Options{MaxConns: 4}, tr))
	tr.pool.Store(s.Pool())
	ctx := t.Context()
	endpointWithJobs(t, s, 3)
	tr.armed.Store(true)
	res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: "q", Now: time.Now(), LeaseFor: time.Minute, Max: 2, PerEndpoint: 2})
	require.NoError(t, err)
	require.False(t, tr.armed.Load(), "the claim sent its lease statement")
	require.NoError(t, *tr.err.Load())
	taken := *tr.taken.Load()
	var got []string
	for _, j := range res.Jobs {
		got = append(got, j.ID)
	}
	require.Len(t, got, 1, "the job leased beside it is not taken")
	require.NotEqual(t, taken, got[0])
	var owner, lease string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT owner, lease_id FROM jobs WHERE id = $1`, taken).Scan(&owner, &lease))
	require.Equal(t, []string{"beside", "beside-lease"}, []string{owner, lease}, "the lease made beside the claim stands")
}
