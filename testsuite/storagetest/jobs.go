package storagetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// jobTests cover storage.JobStore: the whole life of a delivery job, and
// what several queues working one store rely on.
var jobTests = []test{
	{name: "JobLifecycle", run: testJobLifecycle},
	{name: "RecordOutcomesInABatch", run: testRecordOutcomesBatch},
	{name: "AttemptDetailKept", run: testAttemptDetailKept},
	{name: "EventDeliveredWhenEveryEndpointIs", run: testEventDeliveredWhenEveryEndpointIs},
	{name: "ReleaseJobs", run: testReleaseJobs},
	{name: "JobStats", run: testJobStats},
	{name: "ReclaimOnlyExpiredLeases", run: testReclaimExpired},
	{name: "RenewLeases", run: testRenewLeases},
	{name: "ClaimTakesTurns", run: testClaimTakesTurns},
	{name: "PerEndpointLimitAcrossOwners", run: testPerEndpointLimit},
	{name: "FinishedLeasesDoNotCount", run: testFinishedLeasesDoNotCount},
	{name: "ClaimDeletedEndpoint", run: testClaimDeletedEndpoint},
	{name: "WatchJobs", run: testWatchJobs},
	{name: "ConcurrentOwners", run: testConcurrentOwners},
	{name: "RestartTakesBackOwnLeases", run: testRestartTakesBackOwnLeases},
	{name: "OutcomeHandsOffFreedLeases", run: testOutcomeHandoff},
}

// record records one outcome of j and returns its event.
func record(t testing.TB, q storage.JobStore, j *storage.Job, a storage.Attempt, next string, retryAt time.Time) (*storage.Event, error) {
	t.Helper()
	res, err := q.RecordOutcomes(t.Context(), []storage.Outcome{{Job: *j, Attempt: a, Next: next, RetryAt: retryAt}})
	if err != nil {
		return nil, err
	}
	require.Len(t, res, 1, "one result per outcome")
	return res[0].Event, res[0].Err
}

// complete records a successful attempt of j.
func complete(t testing.TB, q storage.JobStore, j *storage.Job, a storage.Attempt) (*storage.Event, error) {
	t.Helper()
	return record(t, q, j, a, storage.EventDelivered, time.Time{})
}

// retry records a failed attempt of j after which another follows at due.
func retry(t testing.TB, q storage.JobStore, j *storage.Job, a storage.Attempt, due time.Time) (*storage.Event, error) {
	t.Helper()
	return record(t, q, j, a, storage.EventPending, due)
}

// archive records an attempt of j after which no other follows.
func archive(t testing.TB, q storage.JobStore, j *storage.Job, a storage.Attempt) (*storage.Event, error) {
	t.Helper()
	return record(t, q, j, a, storage.EventFailed, time.Time{})
}

// claim leases what ClaimJobs gives owner at now, with a minute's lease.
func claim(t testing.TB, q storage.JobStore, owner string, now time.Time, max, perEndpoint int) storage.ClaimResult {
	t.Helper()
	res, err := q.ClaimJobs(t.Context(), storage.ClaimRequest{Owner: owner, Now: now, LeaseFor: time.Minute, Max: max, PerEndpoint: perEndpoint})
	require.NoError(t, err)
	return res
}

func byEndpoint(js []storage.ClaimedJob) map[string]int {
	m := map[string]int{}
	for _, j := range js {
		m[j.EndpointID]++
	}
	return m
}

func testJobLifecycle(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	a := w.endpoint(t, "https://a.example/hook")
	b := w.endpoint(t, "https://b.example/hook")
	_, ev := w.prescribe(t)
	t0 := ev.CreatedAt

	res := claim(t, e.q, "q1", t0.Add(-time.Millisecond), 10, 0)
	require.Empty(t, res.Jobs, "not due yet")
	require.Equal(t, t0, res.NextDue)

	res = claim(t, e.q, "q1", t0, 10, 0)
	require.Len(t, res.Jobs, 2)
	require.True(t, res.NextDue.IsZero(), "nothing left")
	claimed := map[string]storage.ClaimedJob{}
	for _, j := range res.Jobs {
		claimed[j.EndpointID] = j
		require.Equal(t, ev.Payload, j.Payload, "the stored bytes are sent")
		require.NotNil(t, j.Endpoint)
		require.Equal(t, j.EndpointID, j.Endpoint.ID)
		require.Equal(t, ev.ID, j.EventID)
		require.Equal(t, "q1", j.Owner, "a lease carries its owner")
		require.NotEmpty(t, j.LeaseID)
		require.Equal(t, t0.Add(time.Minute), j.LeasedUntil, "and its expiry")
	}
	require.NotEqual(t, res.Jobs[0].LeaseID, res.Jobs[1].LeaseID, "every lease has its own id")
	require.Equal(t, a.Secret, claimed[a.ID].Endpoint.Secret, "the endpoint comes with what signing needs")
	pending, leased := jobs(t, e.q)
	require.Empty(t, pending)
	require.Len(t, leased, 2)
	for _, j := range leased {
		require.Equal(t, claimed[j.EndpointID].Job, j, "ListJobs shows the lease as claimed")
	}
	require.Empty(t, claim(t, e.q, "q2", t0.Add(time.Hour), 10, 0).Jobs, "a leased job is not claimed again")

	// A retry counts the attempt and requeues the job.
	ja := claimed[a.ID]
	attempt := storage.Attempt{AttemptedAt: t0, EndpointID: a.ID, StatusCode: 503, Error: "HTTP 503", DurationMS: 12}
	got, err := retry(t, e.q, &ja.Job, attempt, t0.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, storage.EventPending, got.Status)
	require.Equal(t, []storage.Attempt{attempt}, got.Attempts)
	_, err = retry(t, e.q, &ja.Job, attempt, t0.Add(time.Second))
	require.ErrorIs(t, err, storage.ErrLeaseLost, "a lease ends once")
	_, err = complete(t, e.q, &ja.Job, attempt)
	require.ErrorIs(t, err, storage.ErrLeaseLost)
	pending, leased = jobs(t, e.q)
	require.Len(t, pending, 1)
	require.Equal(t, 1, pending[0].Attempts)
	require.Equal(t, t0.Add(time.Second), pending[0].Due)
	require.Empty(t, pending[0].LeaseID)
	require.Empty(t, pending[0].Owner)
	require.Len(t, leased, 1)

	// b delivered: the event stays pending while a is.
	jb := claimed[b.ID]
	wrong := jb.Job
	wrong.LeaseID = "someone-else"
	_, err = complete(t, e.q, &wrong, storage.Attempt{EndpointID: b.ID})
	require.ErrorIs(t, err, storage.ErrLeaseLost, "another lease id")
	got, err = complete(t, e.q, &jb.Job, storage.Attempt{AttemptedAt: t0, EndpointID: b.ID, StatusCode: 200})
	require.NoError(t, err)
	require.Equal(t, storage.EventPending, got.Status)
	require.ElementsMatch(t, []storage.EventTarget{{EndpointID: a.ID, Status: storage.EventPending}, {EndpointID: b.ID, Status: storage.EventDelivered}}, got.Targets)

	res = claim(t, e.q, "q1", t0.Add(time.Second-time.Millisecond), 10, 0)
	require.Empty(t, res.Jobs, "the retry waits for its due time")
	require.Equal(t, t0.Add(time.Second), res.NextDue)
	res = claim(t, e.q, "q1", t0.Add(time.Second), 10, 0)
	require.Len(t, res.Jobs, 1)
	require.Equal(t, 1, res.Jobs[0].Attempts)
	require.Equal(t, ja.ID, res.Jobs[0].ID, "the same job")
	require.NotEqual(t, ja.LeaseID, res.Jobs[0].LeaseID, "under a new lease")
	got, err = archive(t, e.q, &res.Jobs[0].Job, storage.Attempt{AttemptedAt: t0.Add(time.Second), EndpointID: a.ID, StatusCode: 410, Error: "HTTP 410"})
	require.NoError(t, err)
	require.Equal(t, storage.EventFailed, got.Status, "one endpoint failed permanently")
	require.ElementsMatch(t, []storage.EventTarget{{EndpointID: a.ID, Status: storage.EventFailed}, {EndpointID: b.ID, Status: storage.EventDelivered}}, got.Targets)
	require.Len(t, got.Attempts, 3)
	pending, leased = jobs(t, e.q)
	require.Empty(t, pending)
	require.Empty(t, leased)

	stored, err := e.s.GetEvent(ctx, ev.ID)
	require.NoError(t, err)
	requireEqual(t, got, stored)
	// The status index moved with the status.
	require.Equal(t, []string{ev.ID}, eventIDs(allEvents(t, e.s, storage.EventFilter{Status: storage.EventFailed})))
	require.Empty(t, allEvents(t, e.s, storage.EventFilter{Status: storage.EventPending}))
	require.Equal(t, []string{ev.ID}, eventIDs(allEvents(t, e.s, storage.EventFilter{OrganizationID: w.org.ID, Status: storage.EventFailed})))
}

func testEventDeliveredWhenEveryEndpointIs(t *testing.T, e *env) {
	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	w.endpoint(t, "https://b.example/hook")
	_, ev := w.prescribe(t)
	res := claim(t, e.q, "q", ev.CreatedAt, 10, 0)
	require.Len(t, res.Jobs, 2)
	got, err := complete(t, e.q, &res.Jobs[0].Job, storage.Attempt{EndpointID: res.Jobs[0].EndpointID, StatusCode: 200})
	require.NoError(t, err)
	require.Equal(t, storage.EventPending, got.Status)
	got, err = complete(t, e.q, &res.Jobs[1].Job, storage.Attempt{EndpointID: res.Jobs[1].EndpointID, StatusCode: 204})
	require.NoError(t, err)
	require.Equal(t, storage.EventDelivered, got.Status)
	require.Equal(t, []string{ev.ID}, eventIDs(allEvents(t, e.s, storage.EventFilter{Status: storage.EventDelivered})))
}

func testReleaseJobs(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	_, ev := w.prescribe(t)
	_, ev2 := w.prescribe(t)
	res := claim(t, e.q, "q", ev2.CreatedAt.Add(time.Hour), 10, 0)
	require.Len(t, res.Jobs, 2)

	// Back to pending, due as before, nothing counted.
	require.NoError(t, e.q.ReleaseJobs(ctx, []storage.Job{res.Jobs[0].Job}))
	pending, leased := jobs(t, e.q)
	require.Len(t, pending, 1)
	require.Len(t, leased, 1)
	require.Equal(t, res.Jobs[0].ID, pending[0].ID)
	require.Equal(t, ev.CreatedAt, pending[0].Due, "due when it was")
	require.Equal(t, 0, pending[0].Attempts)
	require.Empty(t, pending[0].LeaseID)
	_, err := complete(t, e.q, &res.Jobs[0].Job, storage.Attempt{})
	require.ErrorIs(t, err, storage.ErrLeaseLost, "a released lease is gone")
	require.NoError(t, e.q.ReleaseJobs(ctx, []storage.Job{res.Jobs[0].Job}), "releasing twice is harmless")
	wrong := res.Jobs[1].Job
	wrong.LeaseID = "another"
	require.NoError(t, e.q.ReleaseJobs(ctx, []storage.Job{wrong}))
	_, leased = jobs(t, e.q)
	require.Len(t, leased, 1, "another lease is not released")

	again := claim(t, e.q, "q", ev2.CreatedAt.Add(time.Hour), 10, 0)
	require.Len(t, again.Jobs, 1, "a released job is claimed again at once, however old its due time")
	require.Equal(t, res.Jobs[0].ID, again.Jobs[0].ID)
	ended, err := e.s.GetEvent(ctx, ev.ID)
	require.NoError(t, err)
	require.Empty(t, ended.Attempts, "a release records no attempt")
}

func testReclaimExpired(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	w.prescribe(t)
	_, ev2 := w.prescribe(t)
	t1 := ev2.CreatedAt
	first := claim(t, e.q, "q1", t1, 1, 0)
	require.Len(t, first.Jobs, 1)
	second := claim(t, e.q, "q2", t1.Add(30*time.Second), 1, 0)
	require.Len(t, second.Jobs, 1)

	n, err := e.q.ReclaimExpired(ctx, t1.Add(time.Minute-time.Millisecond))
	require.NoError(t, err)
	require.Zero(t, n, "a live lease is never taken")
	_, leased := jobs(t, e.q)
	require.Len(t, leased, 2)

	now := t1.Add(time.Minute)
	n, err = e.q.ReclaimExpired(ctx, now)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the expired lease only")
	pending, leased := jobs(t, e.q)
	require.Len(t, pending, 1)
	require.Equal(t, first.Jobs[0].ID, pending[0].ID)
	require.False(t, pending[0].Due.After(now), "due at once")
	require.Equal(t, 0, pending[0].Attempts, "a reclaimed attempt is not counted")
	require.Len(t, leased, 1)
	require.Equal(t, second.Jobs[0].Job, leased[0], "the live lease is untouched")
	_, err = complete(t, e.q, &first.Jobs[0].Job, storage.Attempt{})
	require.ErrorIs(t, err, storage.ErrLeaseLost, "the dead worker's result is dropped")
	again := claim(t, e.q, "q3", now, 10, 0)
	require.Len(t, again.Jobs, 1, "a reclaimed job is claimed again at once")
	require.Equal(t, first.Jobs[0].ID, again.Jobs[0].ID)
	require.NoError(t, e.q.ReleaseJobs(ctx, []storage.Job{again.Jobs[0].Job}))
	_, err = complete(t, e.q, &second.Jobs[0].Job, storage.Attempt{EndpointID: second.Jobs[0].EndpointID, StatusCode: 200})
	require.NoError(t, err, "the live worker's result counts")
	got, err := e.s.GetEvent(ctx, first.Jobs[0].EventID)
	require.NoError(t, err)
	require.Empty(t, got.Attempts)
	require.Equal(t, storage.EventPending, got.Status)
}

func testRenewLeases(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	w.prescribe(t)
	_, ev := w.prescribe(t)
	t1 := ev.CreatedAt
	res := claim(t, e.q, "q1", t1, 2, 0)
	require.Len(t, res.Jobs, 2)
	kept, released := res.Jobs[0].Job, res.Jobs[1].Job
	require.NoError(t, e.q.ReleaseJobs(ctx, []storage.Job{released}))

	lost, err := e.q.RenewLeases(ctx, []storage.Job{kept, released}, t1.Add(5*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []string{released.ID}, lost, "a lease that is gone cannot be renewed")
	_, leased := jobs(t, e.q)
	require.Len(t, leased, 1)
	require.Equal(t, t1.Add(5*time.Minute), leased[0].LeasedUntil)
	require.Equal(t, kept.LeaseID, leased[0].LeaseID, "the same lease, longer")

	n, err := e.q.ReclaimExpired(ctx, t1.Add(2*time.Minute))
	require.NoError(t, err)
	require.Zero(t, n, "a renewed lease outlives its first expiry")
	_, err = complete(t, e.q, &kept, storage.Attempt{EndpointID: kept.EndpointID, StatusCode: 200})
	require.NoError(t, err, "the renewed lease finishes its job")
	lost, err = e.q.RenewLeases(ctx, []storage.Job{kept}, t1.Add(10*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []string{kept.ID}, lost, "a finished job's lease is gone")
}

func testClaimTakesTurns(t *testing.T, e *env) {
	busy := newHookWorld(t, e, true)
	a := busy.endpoint(t, "https://busy.example/hook")
	quiet := newHookWorld(t, e, true)
	b := quiet.endpoint(t, "https://quiet.example/hook")
	for range 10 {
		busy.prescribe(t)
	}
	_, last := quiet.prescribe(t)
	now := last.CreatedAt

	res := claim(t, e.q, "q", now, 2, 0)
	require.Equal(t, map[string]int{a.ID: 1, b.ID: 1}, byEndpoint(res.Jobs), "Max 2: one each, although a's ten jobs are older")
	require.Equal(t, now, res.NextDue, "more is due but Max was reached")

	// PerEndpoint caps one endpoint's share; leases held count.
	res = claim(t, e.q, "q", now, 8, 3)
	require.Equal(t, map[string]int{a.ID: 2}, byEndpoint(res.Jobs), "a holds one lease already: two more make three")
	require.True(t, res.NextDue.IsZero(), "a may take no more and b has nothing")
	require.Empty(t, claim(t, e.q, "q", now, 8, 3).Jobs)

	// Each endpoint's jobs come in due order.
	pending, _ := jobs(t, e.q)
	require.Len(t, pending, 7)
	require.True(t, slices.IsSortedFunc(pending, func(x, y storage.Job) int { return x.Due.Compare(y.Due) }))
	res = claim(t, e.q, "q", now, 1, 0)
	require.Len(t, res.Jobs, 1)
	require.Equal(t, pending[0].ID, res.Jobs[0].ID, "the earliest due first")

	// When Max is smaller than the endpoints, After rotates who goes first.
	quiet.prescribe(t)
	quiet.prescribe(t)
	later := now.Add(time.Hour)
	first, err := e.q.ClaimJobs(t.Context(), storage.ClaimRequest{Owner: "q", Now: later, LeaseFor: time.Minute, Max: 1})
	require.NoError(t, err)
	require.Len(t, first.Jobs, 1)
	second, err := e.q.ClaimJobs(t.Context(), storage.ClaimRequest{Owner: "q", Now: later, LeaseFor: time.Minute, Max: 1, After: first.Jobs[0].EndpointID})
	require.NoError(t, err)
	require.Len(t, second.Jobs, 1)
	require.NotEqual(t, first.Jobs[0].EndpointID, second.Jobs[0].EndpointID, "the other endpoint's turn")
	third, err := e.q.ClaimJobs(t.Context(), storage.ClaimRequest{Owner: "q", Now: later, LeaseFor: time.Minute, Max: 2, After: second.Jobs[0].EndpointID})
	require.NoError(t, err)
	require.Len(t, third.Jobs, 2)
	require.Equal(t, first.Jobs[0].EndpointID, third.Jobs[0].EndpointID, "the turns go round")
	require.Equal(t, second.Jobs[0].EndpointID, third.Jobs[1].EndpointID, "one job each per turn")
}

// testPerEndpointLimit checks that the per-endpoint limit is the store's:
// leases of every owner count, until they end or are reclaimed.
func testPerEndpointLimit(t *testing.T, e *env) {
	ctx := t.Context()
	a, b, now := twoEndpointsDue(t, e, 5, 2)

	one := claim(t, e.q, "q1", now, 10, 2)
	require.Equal(t, map[string]int{a.ID: 2, b.ID: 2}, byEndpoint(one.Jobs))
	two := claim(t, e.q, "q2", now, 10, 2)
	require.Empty(t, two.Jobs, "another owner may not exceed the limit either")
	require.True(t, two.NextDue.IsZero(), "nothing may be claimed until a lease ends")

	var done storage.ClaimedJob
	for _, j := range one.Jobs {
		if j.EndpointID == a.ID {
			done = j
			break
		}
	}
	_, err := complete(t, e.q, &done.Job, storage.Attempt{EndpointID: a.ID, StatusCode: 200})
	require.NoError(t, err)
	two = claim(t, e.q, "q2", now, 10, 2)
	require.Equal(t, map[string]int{a.ID: 1}, byEndpoint(two.Jobs), "a finished lease frees its place, for any owner")
	require.Equal(t, "q2", two.Jobs[0].Owner)

	// An expired lease still holds its place until it is reclaimed.
	expired := now.Add(2 * time.Minute)
	require.Empty(t, claim(t, e.q, "q3", expired, 10, 2).Jobs)
	n, err := e.q.ReclaimExpired(ctx, expired)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	three := claim(t, e.q, "q3", expired, 10, 2)
	require.Equal(t, map[string]int{a.ID: 2, b.ID: 2}, byEndpoint(three.Jobs), "reclaimed leases free their places")
}

func testClaimDeletedEndpoint(t *testing.T, e *env) {
	w := newHookWorld(t, e, true)
	ep := w.endpoint(t, "https://a.example/hook")
	kept := w.endpoint(t, "https://b.example/hook")
	_, ev := w.prescribe(t)
	require.NoError(t, e.s.DeleteWebhookEndpoint(t.Context(), ep.ID))
	res := claim(t, e.q, "q", ev.CreatedAt, 10, 0)
	require.Len(t, res.Jobs, 2, "jobs queued for a deleted endpoint are still claimed, to be recorded as failed")
	for _, j := range res.Jobs {
		require.Equal(t, ev.Payload, j.Payload)
		if j.EndpointID == ep.ID {
			require.Nil(t, j.Endpoint, "the deleted endpoint")
			continue
		}
		require.NotNil(t, j.Endpoint)
		require.Equal(t, kept.ID, j.Endpoint.ID)
	}
}

// testWatchJobs checks that whoever writes jobs wakes the watchers: a new
// event's, a replay's, a retry's, a release's and a reclaim's jobs.
func testWatchJobs(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	ep := w.endpoint(t, "https://a.example/hook")
	ch, stop := e.q.WatchJobs()
	other, stopOther := e.q.WatchJobs()
	defer stopOther()
	drain := func() {
		for {
			select {
			case <-ch:
			case <-other:
			default:
				return
			}
		}
	}
	woken := func(what string) {
		t.Helper()
		for _, c := range []<-chan struct{}{ch, other} {
			select {
			case <-c:
			case <-time.After(10 * time.Second): // a guard against a hang, not a wait
				t.Fatalf("no watcher woke after %s", what)
			}
		}
		drain()
	}

	_, ev := w.prescribe(t)
	woken("a prescription queued its event's job")
	res := claim(t, e.q, "q", ev.CreatedAt, 1, 0)
	require.Len(t, res.Jobs, 1)
	drain()
	_, err := retry(t, e.q, &res.Jobs[0].Job, storage.Attempt{EndpointID: ep.ID, StatusCode: 500}, ev.CreatedAt.Add(time.Second))
	require.NoError(t, err)
	woken("a retry")
	res = claim(t, e.q, "q", ev.CreatedAt.Add(time.Second), 1, 0)
	require.Len(t, res.Jobs, 1)
	require.NoError(t, e.q.ReleaseJobs(ctx, []storage.Job{res.Jobs[0].Job}))
	woken("a release")
	res = claim(t, e.q, "q", ev.CreatedAt.Add(time.Second), 1, 0)
	require.Len(t, res.Jobs, 1)
	drain()
	n, err := e.q.ReclaimExpired(ctx, ev.CreatedAt.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	woken("a reclaim")
	res = claim(t, e.q, "q", ev.CreatedAt.Add(time.Hour), 1, 0)
	require.Len(t, res.Jobs, 1)
	_, err = complete(t, e.q, &res.Jobs[0].Job, storage.Attempt{EndpointID: ep.ID, StatusCode: 200})
	require.NoError(t, err)
	drain()
	_, err = e.s.ReplayEvent(ctx, ev.ID)
	require.NoError(t, err)
	woken("a replay")

	stop()
	stop() // harmless
	w.prescribe(t)
	select {
	case <-other:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher left was not woken")
	}
	select {
	case <-ch:
		t.Fatal("a stopped watch was woken")
	default:
	}
}

// testConcurrentOwners runs several owners claiming and finishing at once:
// no job is leased twice at a time, every job is delivered exactly once, and
// no endpoint ever has more leases than the limit.
func testConcurrentOwners(t *testing.T, e *env) {
	const owners, perEndpoint, events = 4, 2, 12
	w := newHookWorld(t, e, true)
	endpoints := []storage.WebhookEndpoint{w.endpoint(t, "https://a.example/hook"), w.endpoint(t, "https://b.example/hook")}
	var ids []string
	var last storage.Event
	for range events {
		var ev storage.Event
		_, ev = w.prescribe(t)
		ids = append(ids, ev.ID)
		last = ev
	}
	now := last.CreatedAt
	var (
		mu       sync.Mutex
		holding  = map[string]int{} // endpoint -> leases held by the owners here
		most     int
		finished = map[string]int{} // job id -> completions
	)
	var wg sync.WaitGroup
	for o := range owners {
		wg.Go(func() {
			owner := fmt.Sprintf("owner-%d", o)
			for idle := 0; idle < 50; {
				res, err := e.q.ClaimJobs(t.Context(), storage.ClaimRequest{Owner: owner, Now: now, LeaseFor: time.Hour, Max: 3, PerEndpoint: perEndpoint})
				if err != nil {
					t.Errorf("%s: claim: %v", owner, err)
					return
				}
				if len(res.Jobs) == 0 {
					idle++
					time.Sleep(time.Millisecond) // let the other owners finish theirs
					continue
				}
				mu.Lock()
				for _, j := range res.Jobs {
					holding[j.EndpointID]++
					most = max(most, holding[j.EndpointID])
				}
				mu.Unlock()
				for _, j := range res.Jobs {
					mu.Lock()
					holding[j.EndpointID]-- // before the lease ends: never counts one the store has freed
					finished[j.ID]++
					mu.Unlock()
					res, err := e.q.RecordOutcomes(t.Context(), []storage.Outcome{{Job: j.Job, Next: storage.EventDelivered,
						Attempt: storage.Attempt{EndpointID: j.EndpointID, StatusCode: 200}}})
					if err == nil && len(res) == 1 {
						err = res[0].Err
					}
					if err != nil {
						t.Errorf("%s: complete %s: %v", owner, j.ID, err)
					}
				}
			}
		})
	}
	wg.Wait()
	require.LessOrEqual(t, most, perEndpoint, "an endpoint held more leases than the limit")
	require.Len(t, finished, events*len(endpoints), "every job was delivered")
	for id, n := range finished {
		require.Equal(t, 1, n, "job %s was leased and finished %d times", id, n)
	}
	for _, id := range ids {
		ev, err := e.s.GetEvent(t.Context(), id)
		require.NoError(t, err)
		require.Equal(t, storage.EventDelivered, ev.Status)
		require.Len(t, ev.Attempts, len(endpoints))
	}
	pending, leased := jobs(t, e.q)
	require.Empty(t, pending)
	require.Empty(t, leased)
}

// testRecordOutcomesBatch records several outcomes in one call: two of one
// event, a retry, a permanent failure, and one whose lease is gone, which
// alone is refused.
func testRecordOutcomesBatch(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	a := w.endpoint(t, "https://a.example/hook")
	b := w.endpoint(t, "https://b.example/hook")
	_, ev1 := w.prescribe(t)
	_, ev2 := w.prescribe(t)
	now := ev2.CreatedAt
	res := claim(t, e.q, "q", now, 10, 0)
	require.Len(t, res.Jobs, 4)
	job := func(ev storage.Event, ep storage.WebhookEndpoint) storage.Job {
		for _, j := range res.Jobs {
			if j.EventID == ev.ID && j.EndpointID == ep.ID {
				return j.Job
			}
		}
		t.Fatalf("no job of %s for %s", ev.ID, ep.ID)
		return storage.Job{}
	}
	lost := job(ev2, b)
	require.NoError(t, e.q.ReleaseJobs(ctx, []storage.Job{lost}))
	ok := func(ep storage.WebhookEndpoint, code int) storage.Attempt {
		return storage.Attempt{AttemptedAt: now, EndpointID: ep.ID, StatusCode: code}
	}
	outcomes := []storage.Outcome{
		{Job: job(ev1, a), Attempt: ok(a, 200), Next: storage.EventDelivered},
		{Job: job(ev1, b), Attempt: ok(b, 410), Next: storage.EventFailed},
		{Job: job(ev2, a), Attempt: ok(a, 503), Next: storage.EventPending, RetryAt: now.Add(time.Minute)},
		{Job: lost, Attempt: ok(b, 200), Next: storage.EventDelivered},
	}
	rec, err := e.q.RecordOutcomes(ctx, outcomes)
	require.NoError(t, err)
	require.Len(t, rec, 4, "one result per outcome, in order")
	require.NoError(t, rec[0].Err)
	require.Equal(t, storage.EventPending, rec[0].Event.Status, "after the first outcome, b was still pending")
	require.NoError(t, rec[1].Err)
	require.Equal(t, storage.EventFailed, rec[1].Event.Status, "both outcomes of one event are recorded")
	require.Len(t, rec[1].Event.Attempts, 2)
	require.NoError(t, rec[2].Err)
	require.Equal(t, storage.EventPending, rec[2].Event.Status)
	require.ErrorIs(t, rec[3].Err, storage.ErrLeaseLost, "a released lease records nothing")
	require.Nil(t, rec[3].Event)

	got1, err := e.s.GetEvent(ctx, ev1.ID)
	require.NoError(t, err)
	requireEqual(t, rec[1].Event, got1)
	got2, err := e.s.GetEvent(ctx, ev2.ID)
	require.NoError(t, err)
	require.Len(t, got2.Attempts, 1, "the refused outcome left no attempt")
	pending, leased := jobs(t, e.q)
	require.Empty(t, leased)
	require.Len(t, pending, 2, "the retry and the released job")
	rec, err = e.q.RecordOutcomes(ctx, outcomes[:1])
	require.NoError(t, err)
	require.ErrorIs(t, rec[0].Err, storage.ErrLeaseLost, "an outcome is recorded once")
	rec, err = e.q.RecordOutcomes(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, rec)
}

// testJobStats: the counts and the oldest due time agree with the queue
// as ListJobs reads it, through claims, a retry and a delivery.
func testJobStats(t *testing.T, e *env) {
	ctx := t.Context()
	agree := func(msg string) storage.JobStats {
		t.Helper()
		st, err := e.q.JobStats(ctx)
		require.NoError(t, err)
		pending, leased := jobs(t, e.q)
		require.Equal(t, len(pending), st.Pending, msg)
		require.Equal(t, len(leased), st.Leased, msg)
		var oldest time.Time
		for _, j := range pending {
			if oldest.IsZero() || j.Due.Before(oldest) {
				oldest = j.Due
			}
		}
		require.True(t, oldest.Equal(st.OldestDue), "%s: oldest due %s, stats say %s", msg, oldest, st.OldestDue)
		return st
	}
	require.Zero(t, agree("empty"), "an empty queue")
	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	w.endpoint(t, "https://b.example/hook")
	_, ev := w.prescribe(t)
	w.prescribe(t)
	st := agree("two events, four jobs")
	require.Equal(t, 4, st.Pending)
	require.True(t, ev.CreatedAt.Equal(st.OldestDue))

	res := claim(t, e.q, "q", e.clock.Now().Add(time.Hour), 3, 0)
	require.Len(t, res.Jobs, 3)
	require.Equal(t, 3, agree("three claimed").Leased)
	_, err := retry(t, e.q, &res.Jobs[0].Job, storage.Attempt{AttemptedAt: e.clock.Now(), StatusCode: 503}, e.clock.Now().Add(time.Minute))
	require.NoError(t, err)
	_, err = complete(t, e.q, &res.Jobs[1].Job, storage.Attempt{AttemptedAt: e.clock.Now(), StatusCode: 200})
	require.NoError(t, err)
	st = agree("one retried, one delivered")
	require.Equal(t, 2, st.Pending)
	require.Equal(t, 1, st.Leased)
}

// testRestartTakesBackOwnLeases: a process restarted after a crash finds
// the jobs its predecessor had leased pending again at once, long before
// their leases would expire, due when they were and with no attempt
// counted, and claims them again; the dead process's results are
// dropped. (Badger keeps leases in memory; a PostgreSQL replica takes
// back the leases recorded under its id.)
func testRestartTakesBackOwnLeases(t *testing.T, e *env) {
	if e.cfg.restart == nil {
		t.Skip("storagetest: no Restarter for this store (WithRestart)")
	}
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	w.endpoint(t, "https://a.example/hook")
	_, ev := w.prescribe(t)
	_, ev2 := w.prescribe(t)
	now := ev2.CreatedAt
	res, err := e.q.ClaimJobs(ctx, storage.ClaimRequest{Owner: "q", Now: now, LeaseFor: time.Hour, Max: 10})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 2)

	e.s, e.q = e.cfg.restart(t, e.s, e.clock.Now)
	pending, leased := jobs(t, e.q)
	require.Empty(t, leased, "no lease outlives its process's restart")
	require.Len(t, pending, 2)
	dues := map[string]time.Time{}
	for _, j := range pending {
		require.Zero(t, j.Attempts, "a taken-back attempt is not counted")
		require.Empty(t, j.LeaseID)
		dues[j.EventID] = j.Due
	}
	require.Equal(t, map[string]time.Time{ev.ID: ev.CreatedAt, ev2.ID: ev2.CreatedAt}, dues, "due when they were")
	_, err = complete(t, e.q, &res.Jobs[0].Job, storage.Attempt{})
	require.ErrorIs(t, err, storage.ErrLeaseLost, "the dead process's result is dropped")

	again, err := e.q.ClaimJobs(ctx, storage.ClaimRequest{Owner: "q2", Now: now, LeaseFor: time.Hour, Max: 10})
	require.NoError(t, err)
	require.Len(t, again.Jobs, 2, "claimed again at once, well within the old leases")
	ended, err := e.s.GetEvent(ctx, ev.ID)
	require.NoError(t, err)
	require.Empty(t, ended.Attempts, "a restart records no attempt")
}

// testAttemptDetailKept: an attempt's debugging detail (class, signature,
// the secrets' ids, the answer's headers and body, binary included) is
// stored with the outcome, in the same write, and read back as recorded;
// only the newest attempts keep the answer; retention purges it all with
// the event.
func testAttemptDetailKept(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	ep := w.endpoint(t, "https://a.example/hook")
	_, ev := w.prescribe(t)
	t0 := ev.CreatedAt
	body := append([]byte(`{"error":"bad signature"}`), 0xff, 0x00)
	detailed := storage.Attempt{AttemptedAt: t0, EndpointID: ep.ID, StatusCode: 401, Error: "HTTP 401", DurationMS: 3,
		ErrorClass: storage.AttemptHTTPStatus, Signature: "t=1,v1=abcd", SecretIDs: []string{storage.SecretID(ep.Secret)},
		AttemptDetail: storage.BoundAttemptDetail([][2]string{{"Content-Type", "application/json"}, {"X-Trace", "1"}}, body, true)}
	var got *storage.Event
	for i := range storage.MaxDetailedAttempts + 2 {
		res := claim(t, e.q, "q1", t0.Add(time.Duration(i)*time.Second), 1, 0)
		require.Len(t, res.Jobs, 1)
		a := detailed
		a.AttemptedAt = t0.Add(time.Duration(i) * time.Second)
		var err error
		got, err = retry(t, e.q, &res.Jobs[0].Job, a, t0.Add(time.Duration(i+1)*time.Second))
		require.NoError(t, err)
	}
	stored, err := e.s.GetEvent(ctx, ev.ID)
	require.NoError(t, err)
	requireEqual(t, got, stored)
	require.Len(t, stored.Attempts, storage.MaxDetailedAttempts+2)
	for i, a := range stored.Attempts {
		require.Equal(t, storage.AttemptHTTPStatus, a.ErrorClass)
		require.Equal(t, "t=1,v1=abcd", a.Signature)
		require.Equal(t, []string{storage.SecretID(ep.Secret)}, a.SecretIDs)
		if i < 2 {
			require.Empty(t, a.ResponseBody, "attempt %d is older than the newest ones", i)
			require.Empty(t, a.ResponseHeaders)
			continue
		}
		require.Equal(t, body, a.ResponseBody, "attempt %d", i)
		require.True(t, a.BodyTruncated)
		require.Equal(t, [][2]string{{"Content-Type", "application/json"}, {"X-Trace", "1"}}, a.ResponseHeaders)
	}

	res := claim(t, e.q, "q1", t0.Add(time.Hour), 1, 0)
	require.Len(t, res.Jobs, 1)
	_, err = archive(t, e.q, &res.Jobs[0].Job, detailed)
	require.NoError(t, err)
	n, err := e.s.PurgeEvents(ctx, e.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1)
	_, err = e.s.GetEvent(ctx, ev.ID)
	require.ErrorIs(t, err, storage.ErrNotFound, "retention takes the attempts with their event")
}

// testOutcomeHandoff covers storage.JobHandoff, for a store that has it:
// an outcome's freed lease goes, in the transaction that records it, to
// its endpoint's next due job, never past the per-endpoint limit counted
// over every owner, nor to a job not due, an endpoint disabled or one
// whose lease was lost.
func testOutcomeHandoff(t *testing.T, e *env) {
	h, ok := e.q.(storage.JobHandoff)
	if !ok {
		t.Skip("the store hands off no leases (storage.JobHandoff)")
	}
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	a := w.endpoint(t, "https://a.example/hook")
	other := newHookWorld(t, e, true)
	b := other.endpoint(t, "https://b.example/hook")
	var last storage.Event
	for range 6 {
		_, last = w.prescribe(t)
	}
	_, last = other.prescribe(t)
	now := last.CreatedAt
	pendingA := func() []storage.Job {
		pending, _ := jobs(t, e.q)
		var out []storage.Job
		for _, j := range pending {
			if j.EndpointID == a.ID {
				out = append(out, j)
			}
		}
		return out
	}
	outcome := func(j storage.Job, next string, retryAt time.Time) storage.Outcome {
		return storage.Outcome{Job: j, Attempt: storage.Attempt{EndpointID: j.EndpointID, StatusCode: 200, AttemptedAt: now}, Next: next, RetryAt: retryAt}
	}
	handoff := func(outcomes []storage.Outcome, max, perEndpoint int) ([]storage.Recorded, []storage.ClaimedJob) {
		t.Helper()
		rec, handed, err := h.RecordOutcomesHandoff(ctx, outcomes, storage.ClaimRequest{Owner: "q2", Now: now, LeaseFor: time.Minute, Max: max, PerEndpoint: perEndpoint})
		require.NoError(t, err)
		require.Len(t, rec, len(outcomes))
		return rec, handed
	}

	one := claim(t, e.q, "q1", now, 10, 2)
	require.Equal(t, map[string]int{a.ID: 2, b.ID: 1}, byEndpoint(one.Jobs))
	var ownA []storage.ClaimedJob
	for _, j := range one.Jobs {
		if j.EndpointID == a.ID {
			ownA = append(ownA, j)
		}
	}
	nextA := pendingA()[0]

	// Delivered: a's freed place goes to a's next due job.
	rec, handed := handoff([]storage.Outcome{outcome(ownA[0].Job, storage.EventDelivered, time.Time{})}, 10, 2)
	require.NoError(t, rec[0].Err)
	require.Equal(t, storage.EventDelivered, rec[0].Event.Targets[0].Status, "the outcome is recorded")
	require.Len(t, handed, 1, "one lease ended: one job handed")
	got := handed[0]
	require.Equal(t, nextA.ID, got.ID, "a's next job in due order")
	require.Equal(t, "q2", got.Owner)
	require.NotEmpty(t, got.LeaseID)
	require.NotNil(t, got.Endpoint)
	require.Equal(t, a.ID, got.Endpoint.ID)
	require.NotEmpty(t, got.Payload)
	require.Empty(t, claim(t, e.q, "q3", now, 10, 2).Jobs, "a is at its limit again, b has nothing left")

	// The limit counts every owner's leases: q1 still holds one of a's.
	rec, handed = handoff([]storage.Outcome{outcome(got.Job, storage.EventPending, now.Add(time.Hour))}, 10, 1)
	require.NoError(t, rec[0].Err)
	require.Empty(t, handed, "PerEndpoint 1: q1's lease fills it")
	_, leased := jobs(t, e.q)
	require.Len(t, leased, 2, "q1's lease of a and its lease of b")

	// A lost lease frees nothing; nor does a job not due yet get handed.
	stale := ownA[1].Job
	stale.LeaseID = "not-the-lease"
	rec, handed = handoff([]storage.Outcome{outcome(stale, storage.EventDelivered, time.Time{})}, 10, 2)
	require.ErrorIs(t, rec[0].Err, storage.ErrLeaseLost)
	require.Empty(t, handed)

	// Max bounds the handoff, and the endpoints take turns in id order.
	var jb storage.ClaimedJob
	for _, j := range one.Jobs {
		if j.EndpointID == b.ID {
			jb = j
		}
	}
	other.prescribe(t)
	other.prescribe(t)
	rec, handed = handoff([]storage.Outcome{outcome(ownA[1].Job, storage.EventDelivered, time.Time{}), outcome(jb.Job, storage.EventDelivered, time.Time{})}, 1, 2)
	require.NoError(t, rec[0].Err)
	require.NoError(t, rec[1].Err)
	require.Len(t, handed, 1, "Max 1")
	require.Equal(t, min(a.ID, b.ID), handed[0].EndpointID, "the first endpoint's turn")

	// A disabled endpoint gets none: its jobs are held.
	_, err := e.s.DisableWebhookEndpoint(ctx, handed[0].EndpointID, "held by the test")
	require.NoError(t, err)
	rec, handed = handoff([]storage.Outcome{outcome(handed[0].Job, storage.EventDelivered, time.Time{})}, 10, 2)
	require.NoError(t, rec[0].Err)
	require.Empty(t, handed)
}

// testFinishedLeasesDoNotCount checks that the jobs the claiming owner
// reports finished (attempted, outcome not yet recorded) keep their leases
// but leave their places in the per-endpoint limit to new claims: a slow
// outcome write must not stop an endpoint's deliveries.
func testFinishedLeasesDoNotCount(t *testing.T, e *env) {
	a, b, now := twoEndpointsDue(t, e, 10, 2)
	claimFinished := func(owner string, finished map[string][]string) storage.ClaimResult {
		t.Helper()
		res, err := e.q.ClaimJobs(t.Context(), storage.ClaimRequest{Owner: owner, Now: now, LeaseFor: time.Minute,
			Max: 10, PerEndpoint: 2, Finished: finished})
		require.NoError(t, err)
		return res
	}

	one := claimFinished("q1", nil)
	require.Equal(t, map[string]int{a.ID: 2, b.ID: 2}, byEndpoint(one.Jobs))
	require.Empty(t, claimFinished("q1", nil).Jobs, "the limit is reached")

	idsOf := func(jobs ...[]storage.ClaimedJob) []string {
		var ids []string
		for _, js := range jobs {
			for _, j := range js {
				if j.EndpointID == a.ID {
					ids = append(ids, j.ID)
				}
			}
		}
		return ids
	}
	// Both of a's jobs were attempted; their outcomes wait to be recorded.
	two := claimFinished("q1", map[string][]string{a.ID: idsOf(one.Jobs)})
	require.Equal(t, map[string]int{a.ID: 2}, byEndpoint(two.Jobs), "finished jobs leave their places to new ones")
	held := map[string]bool{}
	for _, j := range append(one.Jobs, two.Jobs...) {
		require.False(t, held[j.ID], "a finished job keeps its lease: it is not claimed again")
		held[j.ID] = true
	}
	require.Empty(t, claimFinished("q1", map[string][]string{a.ID: idsOf(one.Jobs)}).Jobs, "the new ones count")
	three := claimFinished("q1", map[string][]string{a.ID: append(idsOf(one.Jobs, two.Jobs), "unknown-1", "unknown-2")})
	require.Equal(t, map[string]int{a.ID: 2}, byEndpoint(three.Jobs), "a list beyond the leases uncounts them all, no more")
}

// twoEndpointsDue registers endpoints a and b for two partners and makes
// na and nb jobs due for them, in that order; now is when the last is due.
func twoEndpointsDue(t *testing.T, e *env, na, nb int) (a, b storage.WebhookEndpoint, now time.Time) {
	t.Helper()
	w := newHookWorld(t, e, true)
	a = w.endpoint(t, "https://a.example/hook")
	other := newHookWorld(t, e, true)
	b = other.endpoint(t, "https://b.example/hook")
	var last storage.Event
	for range na {
		_, last = w.prescribe(t)
	}
	for range nb {
		_, last = other.prescribe(t)
	}
	return a, b, last.CreatedAt
}
