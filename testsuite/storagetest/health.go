package storagetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// healthTests cover endpoint health and auto-disable (storage/health.go):
// the failing streak kept with the outcomes, and a disabled endpoint's
// jobs held until it is enabled.
var healthTests = []test{
	{name: "HealthStreakResetBySuccess", run: testHealthStreak},
	{name: "DisabledEndpointJobsHeld", run: testDisabledJobsHeld},
	{name: "AutoDisableAfterFailingPeriod", run: testAutoDisable},
	{name: "ReplayEventTo", run: testReplayEventTo},
}

func getEndpoint(t testing.TB, s storage.Store, id string) *storage.WebhookEndpoint {
	t.Helper()
	ep, err := s.GetWebhookEndpoint(t.Context(), id)
	require.NoError(t, err)
	return ep
}

// claimOne claims at now and requires one job of the endpoint.
func claimOne(t testing.TB, q storage.JobStore, now time.Time, endpointID string) storage.ClaimedJob {
	t.Helper()
	res := claim(t, q, "q", now, 10, 0)
	require.Len(t, res.Jobs, 1)
	require.Equal(t, endpointID, res.Jobs[0].EndpointID)
	return res.Jobs[0]
}

func outcome(j storage.ClaimedJob, at time.Time, next string, retryAt time.Time, disableAfter time.Duration) storage.Outcome {
	code := 500
	if next == storage.EventDelivered {
		code = 200
	}
	return storage.Outcome{Job: j.Job, Attempt: storage.Attempt{AttemptedAt: at, EndpointID: j.EndpointID, StatusCode: code},
		Next: next, RetryAt: retryAt, DisableAfter: disableAfter}
}

func recordOne(t testing.TB, q storage.JobStore, o storage.Outcome) storage.Recorded {
	t.Helper()
	res, err := q.RecordOutcomes(t.Context(), []storage.Outcome{o})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.NoError(t, res[0].Err)
	return res[0]
}

func testHealthStreak(t *testing.T, e *env) {
	w := newHookWorld(t, e, true)
	ep := w.endpoint(t, "https://a.example/hook")
	require.Nil(t, ep.FailingSince)
	require.Nil(t, getEndpoint(t, e.s, ep.ID).FailingSince, "a new endpoint has no failing streak")
	_, ev := w.prescribe(t)
	t0 := ev.CreatedAt.Add(time.Second)
	j := claimOne(t, e.q, t0, ep.ID)
	recordOne(t, e.q, outcome(j, t0, storage.EventPending, t0.Add(time.Minute), time.Hour))
	got := getEndpoint(t, e.s, ep.ID)
	require.NotNil(t, got.FailingSince)
	require.True(t, got.FailingSince.Equal(storage.Timestamp(t0)), "the streak begins at its first failure")

	t1 := t0.Add(time.Minute)
	j = claimOne(t, e.q, t1, ep.ID)
	recordOne(t, e.q, outcome(j, t1, storage.EventPending, t1.Add(time.Minute), time.Hour))
	got = getEndpoint(t, e.s, ep.ID)
	require.True(t, got.FailingSince.Equal(storage.Timestamp(t0)), "a later failure keeps the streak's start")
	require.Nil(t, got.DisabledAt, "not failing for the period yet")

	t2 := t1.Add(time.Minute)
	j = claimOne(t, e.q, t2, ep.ID)
	recordOne(t, e.q, outcome(j, t2, storage.EventDelivered, time.Time{}, time.Hour))
	require.Nil(t, getEndpoint(t, e.s, ep.ID).FailingSince, "a success ends the streak")

	// A batch with a success between failures leaves a streak from the
	// first failure after the success.
	_, ev2 := w.prescribe(t)
	_, ev3 := w.prescribe(t)
	t3 := maxTime(t2, ev3.CreatedAt, ev2.CreatedAt).Add(time.Second)
	res := claim(t, e.q, "q", t3, 10, 0)
	require.Len(t, res.Jobs, 2)
	rec, err := e.q.RecordOutcomes(t.Context(), []storage.Outcome{
		outcome(res.Jobs[0], t3, storage.EventPending, t3.Add(time.Hour), time.Hour),
		outcome(res.Jobs[1], t3.Add(time.Second), storage.EventDelivered, time.Time{}, time.Hour),
	})
	require.NoError(t, err)
	require.Len(t, rec, 2)
	require.Nil(t, getEndpoint(t, e.s, ep.ID).FailingSince, "the batch's last attempt succeeded")
}

func maxTime(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}

func testDisabledJobsHeld(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	ep := w.endpoint(t, "https://a.example/hook")
	other := w.endpoint(t, "https://b.example/hook")
	got, err := e.s.DisableWebhookEndpoint(ctx, ep.ID, "operator")
	require.NoError(t, err)
	require.NotNil(t, got.DisabledAt)
	require.Equal(t, "operator", got.DisabledReason)
	again, err := e.s.DisableWebhookEndpoint(ctx, ep.ID, "second")
	require.NoError(t, err)
	require.Equal(t, "operator", again.DisabledReason, "disabling again keeps the first reason")
	require.True(t, again.DisabledAt.Equal(*got.DisabledAt))

	_, ev := w.prescribe(t)
	now := ev.CreatedAt.Add(time.Second)
	res := claim(t, e.q, "q", now, 10, 0)
	require.Equal(t, map[string]int{other.ID: 1}, byEndpoint(res.Jobs), "the disabled endpoint's job is held")
	pending, _ := jobs(t, e.q)
	require.Len(t, pending, 1, "held, not dropped")
	require.Equal(t, ep.ID, pending[0].EndpointID)
	require.Empty(t, claim(t, e.q, "q", now.Add(time.Hour), 10, 0).Jobs, "still held later")

	_, err = e.s.DisableWebhookEndpoint(ctx, storage.NewID(), "x")
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = e.s.EnableWebhookEndpoint(ctx, storage.NewID())
	require.ErrorIs(t, err, storage.ErrNotFound)

	ch, stop := e.q.WatchJobs()
	defer stop()
	en, err := e.s.EnableWebhookEndpoint(ctx, ep.ID)
	require.NoError(t, err)
	require.Nil(t, en.DisabledAt)
	require.Empty(t, en.DisabledReason)
	<-ch // enabling wakes the queues
	res = claim(t, e.q, "q", now.Add(time.Hour), 10, 0)
	require.Equal(t, map[string]int{ep.ID: 1}, byEndpoint(res.Jobs), "enabled: its job resumes")
}

func testAutoDisable(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	ep := w.endpoint(t, "https://a.example/hook")
	_, ev := w.prescribe(t)
	const period = 5 * 24 * time.Hour
	t0 := ev.CreatedAt.Add(time.Second)
	j := claimOne(t, e.q, t0, ep.ID)
	r := recordOne(t, e.q, outcome(j, t0, storage.EventPending, t0.Add(period/2), period))
	require.Nil(t, r.Disabled)
	t1 := t0.Add(period / 2)
	j = claimOne(t, e.q, t1, ep.ID)
	r = recordOne(t, e.q, outcome(j, t1, storage.EventPending, t0.Add(period), period))
	require.Nil(t, r.Disabled, "failing for half the period")

	// With no period set, nothing is disabled however long it fails.
	t2 := t0.Add(period)
	j = claimOne(t, e.q, t2, ep.ID)
	r = recordOne(t, e.q, outcome(j, t2, storage.EventPending, t2, 0))
	require.Nil(t, r.Disabled, "disable_after 0 turns it off")
	require.Nil(t, getEndpoint(t, e.s, ep.ID).DisabledAt)

	j = claimOne(t, e.q, t2, ep.ID)
	r = recordOne(t, e.q, outcome(j, t2, storage.EventPending, t2.Add(time.Hour), period))
	require.NotNil(t, r.Disabled, "every attempt failed for the period")
	require.Equal(t, ep.ID, r.Disabled.ID)
	require.Equal(t, storage.ReasonFailing, r.Disabled.DisabledReason)
	got := getEndpoint(t, e.s, ep.ID)
	require.NotNil(t, got.DisabledAt)
	require.True(t, got.DisabledAt.Equal(storage.Timestamp(t2)))
	require.Empty(t, claim(t, e.q, "q", t2.Add(2*time.Hour), 10, 0).Jobs, "its retry is held")

	en, err := e.s.EnableWebhookEndpoint(ctx, ep.ID)
	require.NoError(t, err)
	require.Nil(t, en.FailingSince, "enabling forgets the streak")
	j = claimOne(t, e.q, t2.Add(2*time.Hour), ep.ID)
	r = recordOne(t, e.q, outcome(j, t2.Add(2*time.Hour), storage.EventPending, t2.Add(3*time.Hour), period))
	require.Nil(t, r.Disabled, "a new streak starts after enabling")
}

func testReplayEventTo(t *testing.T, e *env) {
	ctx := t.Context()
	w := newHookWorld(t, e, true)
	ep := w.endpoint(t, "https://a.example/hook")
	other := w.endpoint(t, "https://b.example/hook")
	_, ev := w.prescribe(t)
	now := ev.CreatedAt.Add(time.Second)
	res := claim(t, e.q, "q", now, 10, 0)
	require.Len(t, res.Jobs, 2)
	for _, j := range res.Jobs {
		next := storage.EventDelivered
		if j.EndpointID == ep.ID {
			next = storage.EventFailed
		}
		recordOne(t, e.q, outcome(j, now, next, time.Time{}, 0))
	}
	_, err := e.s.ReplayEventTo(ctx, ev.ID, storage.NewID(), now)
	require.ErrorIs(t, err, storage.ErrNotFound, "not the partner's endpoint")
	due := now.Add(time.Hour)
	got, err := e.s.ReplayEventTo(ctx, ev.ID, ep.ID, due)
	require.NoError(t, err)
	require.Equal(t, storage.EventPending, got.Status)
	require.Equal(t, []storage.EventTarget{{EndpointID: ep.ID, Status: storage.EventPending}}, got.Targets)
	pending, _ := jobs(t, e.q)
	require.Len(t, pending, 1, "one job, to that endpoint only")
	require.Equal(t, ep.ID, pending[0].EndpointID)
	require.True(t, pending[0].Due.Equal(storage.Timestamp(due)), "due when asked")
	require.Empty(t, claim(t, e.q, "q", due.Add(-time.Second), 10, 0).Jobs, "not before it is due")
	_, err = e.s.ReplayEventTo(ctx, ev.ID, ep.ID, due)
	require.ErrorIs(t, err, storage.ErrEventPending)
	_ = other
}
