package badger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// queueWorld is a validated organization with one webhook endpoint and a
// patient to prescribe for.
func queueWorld(t *testing.T, s *Store) (storage.Prescription, storage.WebhookEndpoint) {
	t.Helper()
	w := storagetest.NewWorld(t, s)
	return w.Prescription(), w.Endpoint(t, s, "https://a.example")
}

// bounded makes the next claims bounded (true) or full (false).
func (s *Store) bounded(on bool) {
	s.jobs.mu.Lock()
	defer s.jobs.mu.Unlock()
	s.jobs.fullAt = time.Time{}
	if on {
		s.jobs.fullAt = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
}

// TestBoundedClaims checks the deletion-marker workaround: a bounded claim
// starts each endpoint's scan at its low mark, a full claim sees
// everything, and a job queued with a due time before the mark lowers it.
func TestBoundedClaims(t *testing.T) {
	t.Parallel()
	s := openInMemory(t)
	ctx := t.Context()
	rx, ep := queueWorld(t, s)
	for range 50 {
		p := rx
		require.NoError(t, s.CreatePrescription(ctx, &p))
	}
	now := time.Now().Add(time.Second)
	claim := func(max int) storage.ClaimResult {
		t.Helper()
		res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: "q", Now: now, LeaseFor: time.Minute, Max: max})
		require.NoError(t, err)
		return res
	}
	res := claim(40)
	require.Len(t, res.Jobs, 40, "the first claim is full")
	var done []storage.Outcome
	for _, j := range res.Jobs {
		done = append(done, storage.Outcome{Job: j.Job, Next: storage.EventDelivered, Attempt: storage.Attempt{EndpointID: j.EndpointID, StatusCode: 200}})
	}
	rec, err := s.RecordOutcomes(ctx, done)
	require.NoError(t, err)
	for _, r := range rec {
		require.NoError(t, r.Err)
	}
	pending, _, err := s.ListJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 10)
	s.jobs.mu.Lock()
	require.Equal(t, pending[0].Due, s.jobs.low[ep.ID], "the mark is the earliest job left pending")
	s.jobs.low[ep.ID] = pending[5].Due
	s.jobs.mu.Unlock()

	s.bounded(true)
	res = claim(100)
	require.Len(t, res.Jobs, 5, "a bounded claim starts at the mark")
	require.Equal(t, pending[5].ID, res.Jobs[0].ID)
	s.bounded(false)
	res2 := claim(100)
	require.Len(t, res2.Jobs, 5, "a full claim sees the rest")
	require.Equal(t, pending[0].ID, res2.Jobs[0].ID)

	// A release puts a job back with its old due time, before the mark: the
	// mark follows it, so a bounded claim finds it.
	require.NoError(t, s.ReleaseJobs(ctx, []storage.Job{res2.Jobs[0].Job}))
	s.bounded(true)
	res = claim(100)
	require.Len(t, res.Jobs, 1, "a released job is found by a bounded claim")
	require.Equal(t, pending[0].ID, res.Jobs[0].ID)

	// A deleted endpoint's job is found by a full claim only.
	p := rx
	require.NoError(t, s.CreatePrescription(ctx, &p))
	require.NoError(t, s.DeleteWebhookEndpoint(ctx, ep.ID))
	require.Empty(t, claim(100).Jobs, "a bounded claim looks at existing endpoints only")
	s.bounded(false)
	res = claim(100)
	require.Len(t, res.Jobs, 1, "a full claim finds the job, to be recorded as failed")
	require.Nil(t, res.Jobs[0].Endpoint)
}

// TestOldLeasesArePendingAtOpen: a store of an rxgate version that kept
// leases on disk (jl/{job}) is opened with those jobs pending again, due as
// they were.
func TestOldLeasesArePendingAtOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	ctx := t.Context()
	rx, ep := queueWorld(t, s)
	require.NoError(t, s.CreatePrescription(ctx, &rx))
	pending, _, err := s.ListJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	j := pending[0]
	// What the earlier version wrote when it claimed the job.
	old := jobRecord{ID: j.ID, EventID: j.EventID, EndpointID: j.EndpointID, Round: j.Round, Due: j.Due,
		LeaseID: "lease", LeasedUntil: j.Due.Add(time.Hour)}
	require.NoError(t, s.update(ctx, func(txn *tx) error {
		if err := txn.delete(jobPendingKey(ep.ID, j.Due, j.ID)); err != nil {
			return err
		}
		return putRecord(txn, jobLeasedKey(j.ID), old)
	}))
	pending, _, err = s.ListJobs(ctx)
	require.NoError(t, err)
	require.Empty(t, pending)
	require.NoError(t, s.Close())

	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	pending, leased, err := s.ListJobs(ctx)
	require.NoError(t, err)
	require.Equal(t, []storage.Job{j}, pending, "the job is pending again, due as it was")
	require.Empty(t, leased)
	require.NoError(t, s.view(ctx, func(txn *tx) error {
		n := 0
		scanKeys(txn, jobsLeasedPrefix(), func([]byte) { n++ })
		require.Zero(t, n, "no old lease is left")
		return nil
	}))
}

// TestLegacyEventPayloadsAreSplitAtOpen: a store of an rxgate version that
// kept an event's payload in its record is opened with the payload in its
// own key, and the event reads, lists and delivers as before.
func TestLegacyEventPayloadsAreSplitAtOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	ctx := t.Context()
	rx, _ := queueWorld(t, s)
	require.NoError(t, s.CreatePrescription(ctx, &rx))
	events, _, err := s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	require.Len(t, events, 1)
	ev := events[0]
	require.NotEmpty(t, ev.Payload)
	// What the earlier version wrote: the payload in the record, no
	// payload key, no mark.
	require.NoError(t, s.update(ctx, func(txn *tx) error {
		if err := writeFormat1(txn, &ev); err != nil {
			return err
		}
		return txn.delete(metaKey(metaFormat))
	}))
	require.NoError(t, s.Close())

	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	got, err := s.GetEvent(ctx, ev.ID)
	require.NoError(t, err)
	require.Equal(t, ev, *got, "the event reads as before")
	require.NoError(t, s.view(ctx, func(txn *tx) error {
		var r eventRecord
		require.NoError(t, getRecord(txn, eventKey(ev.ID), &r))
		require.Nil(t, r.Payload, "the record no longer holds the payload")
		payload, err := getPayload(txn, ev.ID)
		require.NoError(t, err)
		require.Equal(t, ev.Payload, payload, "the payload has its own key")
		return nil
	}))
	res, err := s.ClaimJobs(ctx, storage.ClaimRequest{Owner: "q", Now: time.Now().Add(time.Second), LeaseFor: time.Minute, Max: 1})
	require.NoError(t, err)
	require.Len(t, res.Jobs, 1)
	require.Equal(t, ev.Payload, res.Jobs[0].Payload, "a claim delivers the same bytes")
}
