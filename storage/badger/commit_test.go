package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// blockCommitter queues a write function that holds the committer until
// the returned function is called.
func blockCommitter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	entered, hold := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.update(context.Background(), func(*tx) error {
			close(entered)
			<-hold
			return nil
		})
	}()
	<-entered
	var once sync.Once
	return func() { once.Do(func() { close(hold) }) }
}

// openInMemory opens an in-memory store that the test's end closes.
func openInMemory(t testing.TB) *Store {
	t.Helper()
	s, err := Open(Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// waitQueued waits until n write functions wait for the committer; the wait
// guards against a hang, it is no timing.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.commit.reqs) < n {
		require.True(t, time.Now().Before(deadline), "%d of %d writes queued", len(s.commit.reqs), n)
		time.Sleep(time.Millisecond)
	}
}

func value(t *testing.T, s *Store, key string) (string, bool) {
	t.Helper()
	var out []byte
	err := s.view(context.Background(), func(txn *tx) (err error) {
		out, err = getRaw(txn, []byte(key))
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return "", false
	}
	require.NoError(t, err)
	return string(out), true
}

// commitVersion is the read timestamp a new transaction gets: it grows by
// one with every commit.
func commitVersion(s *Store) uint64 {
	return s.ts.committed.Load()
}

// TestGroupCommit checks that the write functions waiting together commit
// in one transaction, each answered after it, that a function that fails
// leaves none of its writes while the others commit, and that a function
// reads what the functions before it in the batch wrote.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s := openInMemory(t)
	ctx := t.Context()

	release := blockCommitter(t, s)
	before := commitVersion(s)
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.update(ctx, func(txn *tx) error {
				if err := txn.set([]byte(fmt.Sprintf("k/%02d", i)), []byte("v")); err != nil {
					return err
				}
				if i%4 == 3 {
					return fmt.Errorf("function %d refused", i)
				}
				return nil
			})
		})
	}
	waitQueued(t, s, n)
	release()
	wg.Wait()
	for i, err := range errs {
		_, found := value(t, s, fmt.Sprintf("k/%02d", i))
		if i%4 == 3 {
			require.ErrorContains(t, err, "refused")
			require.False(t, found, "a failed function left its write %d", i)
			continue
		}
		require.NoError(t, err)
		require.True(t, found, "write %d", i)
	}
	require.LessOrEqual(t, commitVersion(s)-before, uint64(2), "the blocking function and then one transaction for all %d", n)

	// Later functions in a batch read what earlier ones wrote.
	release = blockCommitter(t, s)
	var second string
	wg.Go(func() {
		require.NoError(t, s.update(ctx, func(txn *tx) error { return txn.set([]byte("seq"), []byte("first")) }))
	})
	waitQueued(t, s, 1)
	wg.Go(func() {
		require.NoError(t, s.update(ctx, func(txn *tx) error {
			v, err := getRaw(txn, []byte("seq"))
			second = string(v)
			if err != nil {
				return err
			}
			return txn.set([]byte("seq"), append(v, "+second"...))
		}))
	})
	waitQueued(t, s, 2)
	release()
	wg.Wait()
	require.Equal(t, "first", second)
	got, _ := value(t, s, "seq")
	require.Equal(t, "first+second", got)
}

// TestGroupCommitRefusedWrite: a function whose writes Badger refuses fails
// alone; the functions before it in its batch are committed.
func TestGroupCommitRefusedWrite(t *testing.T) {
	t.Parallel()
	s := openInMemory(t)
	ctx := t.Context()
	release := blockCommitter(t, s)
	var wg sync.WaitGroup
	var okErr, badErr error
	wg.Go(func() {
		okErr = s.update(ctx, func(txn *tx) error { return txn.set([]byte("ok"), []byte("v")) })
	})
	waitQueued(t, s, 1)
	wg.Go(func() {
		badErr = s.update(ctx, func(txn *tx) error {
			return txn.set(bytes.Repeat([]byte("k"), 70_000), []byte("v")) // over Badger's key limit
		})
	})
	waitQueued(t, s, 2)
	release()
	wg.Wait()
	require.NoError(t, okErr)
	require.Error(t, badErr)
	_, found := value(t, s, "ok")
	require.True(t, found, "the write before the refused one was committed")
}

// TestWriteFunctionPanics: a panicking function fails alone, and the
// committer lives on. Iterating a prefix the function wrote to is such a
// panic.
func TestWriteFunctionPanics(t *testing.T) {
	t.Parallel()
	s := openInMemory(t)
	ctx := t.Context()
	err := s.update(ctx, func(txn *tx) error {
		if err := txn.set([]byte("x/1"), nil); err != nil {
			return err
		}
		it := txn.iterator(badgerdb.IteratorOptions{Prefix: []byte("x/")})
		it.Close()
		return nil
	})
	require.ErrorContains(t, err, "panicked")
	_, found := value(t, s, "x/1")
	require.False(t, found)
	require.NoError(t, s.update(ctx, func(txn *tx) error { return txn.set([]byte("after"), nil) }), "the committer lives on")
}

// TestCloseCommitsQueuedWrites: writes queued before Close are committed;
// writes after it are refused, and the committer and its flusher have
// ended.
func TestCloseCommitsQueuedWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	release := blockCommitter(t, s)
	errs := make(chan error, 10)
	for i := range 10 {
		go func() {
			errs <- s.update(context.Background(), func(txn *tx) error {
				return txn.set([]byte(fmt.Sprintf("q/%d", i)), []byte("v"))
			})
		}()
	}
	waitQueued(t, s, 10)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	release()
	require.NoError(t, <-closed)
	for range 10 {
		require.NoError(t, <-errs)
	}
	require.ErrorIs(t, s.update(context.Background(), func(*tx) error { return nil }), errClosed)
	for name, done := range map[string]chan struct{}{"committer": s.commit.done, "flusher": s.commit.flushed} {
		select {
		case <-done:
		default:
			t.Errorf("the %s still runs after Close", name)
		}
	}

	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for i := range 10 {
		_, found := value(t, s, fmt.Sprintf("q/%d", i))
		require.True(t, found, "queued write %d is on disk", i)
	}
}

// TestPlannedCreateSeesTheBatch: a prescription create plans outside the
// committer; a write committed in its batch before it (an endpoint
// registered, the organization validated) makes it plan again inside the
// write, so its event goes where the committed state says.
func TestPlannedCreateSeesTheBatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, s *Store, w *plannedWorld) // queued before the create's write
		check func(t *testing.T, ev storage.Event, w *plannedWorld)
	}{
		{
			name: "an endpoint registered meanwhile",
			setup: func(t *testing.T, s *Store, w *plannedWorld) {
				w.second = storage.WebhookEndpoint{PartnerID: w.partner, URL: "https://b.example"}
				require.NoError(t, s.CreateWebhookEndpoint(t.Context(), &w.second))
			},
			check: func(t *testing.T, ev storage.Event, w *plannedWorld) {
				require.Equal(t, storage.EventPending, ev.Status)
				require.Len(t, ev.Targets, 2, "the endpoint committed before the create gets the event")
			},
		},
		{
			name: "the organization validated meanwhile",
			setup: func(t *testing.T, s *Store, w *plannedWorld) {
				_, err := s.ValidateOrganization(t.Context(), w.org)
				require.NoError(t, err)
			},
			check: func(t *testing.T, ev storage.Event, w *plannedWorld) {
				require.Equal(t, storage.EventPending, ev.Status, "validated before the create committed: the event is sent")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openInMemory(t)
			w := newPlannedWorld(t, s, tt.name != "the organization validated meanwhile")
			release := blockCommitter(t, s)
			var wg sync.WaitGroup
			wg.Go(func() { tt.setup(t, s, w) })
			waitQueued(t, s, 1)
			rx := storage.Prescription{OrgID: w.org, UserID: w.user, PatientID: w.patient}
			wg.Go(func() { require.NoError(t, s.CreatePrescription(t.Context(), &rx)) })
			waitQueued(t, s, 2)
			release()
			wg.Wait()
			events, _, err := s.ListEvents(t.Context(), storage.EventFilter{}, storage.PageRequest{Limit: 10})
			require.NoError(t, err)
			require.Len(t, events, 1)
			tt.check(t, events[0], w)
			pending, _, err := s.ListJobs(t.Context())
			require.NoError(t, err)
			require.Len(t, pending, len(events[0].Targets), "one job per target")
		})
	}
}

// TestPlannedCreateSeesTheBatchInFlight: a create planned while an
// endpoint's registration is in flight (committed by Badger, not yet
// synced, so the plan cannot see it) plans again in its write, which
// comes after the registration: the new endpoint gets its event.
func TestPlannedCreateSeesTheBatchInFlight(t *testing.T) {
	t.Parallel()
	s, landing, release := holdLanding(t, Options{InMemory: true})
	ctx := t.Context()
	// letLand lets every batch land until the function it returns is
	// called (also at the test's end, before holdLanding's cleanup).
	letLand := func() func() {
		quit, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-landing:
					release <- nil
				case <-quit:
					return
				}
			}
		}()
		var once sync.Once
		stop := func() { once.Do(func() { close(quit); <-done }) }
		t.Cleanup(stop)
		return stop
	}
	stop := letLand()
	w := newPlannedWorld(t, s, true)
	rx := storage.Prescription{OrgID: w.org, UserID: w.user, PatientID: w.patient}
	require.NoError(t, s.CreatePrescription(ctx, &rx)) // the store has read the partner's endpoints
	stop()

	registered := make(chan error, 1)
	go func() {
		w.second = storage.WebhookEndpoint{PartnerID: w.partner, URL: "https://b.example"}
		registered <- s.CreateWebhookEndpoint(ctx, &w.second)
	}()
	<-landing // the registration is in flight
	unblock := blockCommitter(t, s)
	rx = storage.Prescription{OrgID: w.org, UserID: w.user, PatientID: w.patient}
	created := make(chan error, 1)
	go func() { created <- s.CreatePrescription(ctx, &rx) }()
	waitQueued(t, s, 1) // planned without the registration; its write waits
	unblock()
	// The committer takes the write, and runs it before any landing.
	deadline := time.Now().Add(10 * time.Second)
	for len(s.commit.reqs) > 0 {
		require.True(t, time.Now().Before(deadline), "the committer never took the create's write")
		time.Sleep(time.Millisecond)
	}
	release <- nil // the registration lands
	stop = letLand()
	require.NoError(t, <-created)
	stop()
	require.NoError(t, <-registered)
	events, _, err := s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 10})
	require.NoError(t, err)
	require.Len(t, events, 2)
	i := slices.IndexFunc(events, func(ev storage.Event) bool { return bytes.Contains(ev.Payload, []byte(rx.SCID)) })
	require.GreaterOrEqual(t, i, 0, "the second create's event")
	require.Len(t, events[i].Targets, 2, "the endpoint registered before the create committed gets its event")
}

// TestEndpointIDsFromMemory: a read takes a partner's endpoint ids from
// memory only when what is remembered was read at or before its own
// timestamp with no change of an endpoint index between; a read that
// loaded the last change's timestamp before a later change landed (as if
// it ran just then) does not take ids that a newer read remembered.
func TestEndpointIDsFromMemory(t *testing.T) {
	t.Parallel()
	s := openInMemory(t)
	ctx := t.Context()
	w := newPlannedWorld(t, s, true)
	read := func(txn *tx) []string {
		t.Helper()
		ids, err := s.endpointIDs(txn, w.partner)
		require.NoError(t, err)
		return ids
	}
	var first []string
	require.NoError(t, s.view(ctx, func(txn *tx) error { first = read(txn); return nil }))
	require.Len(t, first, 1)

	// An old read stays open while an endpoint is registered and a newer
	// read remembers both endpoints.
	require.NoError(t, s.view(ctx, func(old *tx) error {
		before := s.mark(markHooks).Load()
		w.second = storage.WebhookEndpoint{PartnerID: w.partner, URL: "https://b.example"}
		require.NoError(t, s.CreateWebhookEndpoint(ctx, &w.second))
		require.NoError(t, s.view(ctx, func(txn *tx) error {
			require.Len(t, read(txn), 2)
			return nil
		}))
		require.Equal(t, first, read(old), "a read older than the change")
		s.mark(markHooks).Store(before) // the old read loaded it before the change landed
		defer s.mark(markHooks).Store(commitVersion(s))
		require.Equal(t, first, read(old), "what a newer read remembered is not the old read's")
		return nil
	}))
	require.NoError(t, s.view(ctx, func(txn *tx) error {
		require.Len(t, read(txn), 2)
		return nil
	}))
}

// plannedWorld is a partner with one endpoint, an organization, a user and
// a patient.
type plannedWorld struct {
	partner, org, user, patient string
	second                      storage.WebhookEndpoint
}

func newPlannedWorld(t *testing.T, s *Store, validated bool) *plannedWorld {
	t.Helper()
	ctx := t.Context()
	p := storage.Partner{Name: "P"}
	require.NoError(t, s.CreatePartner(ctx, &p))
	o := storage.Organization{Name: "O", PartnerID: p.ID}
	require.NoError(t, s.CreateOrganization(ctx, &o))
	if validated {
		_, err := s.ValidateOrganization(ctx, o.ID)
		require.NoError(t, err)
	}
	u := storage.User{OrgID: o.ID, Email: "u@example.com"}
	require.NoError(t, s.CreateUser(ctx, &u))
	pt := storage.Patient{OrgID: o.ID, UserID: u.ID}
	require.NoError(t, s.CreatePatient(ctx, &pt))
	require.NoError(t, s.CreateWebhookEndpoint(ctx, &storage.WebhookEndpoint{PartnerID: p.ID, URL: "https://a.example"}))
	return &plannedWorld{partner: p.ID, org: o.ID, user: u.ID, patient: pt.ID}
}

// holdLanding opens a store whose batches, once Badger has committed them,
// wait to land (to be published and answered) until the test lets them:
// each arrives on landing, and the test sends on release to let it go (nil)
// or to fail it (an error).
func holdLanding(t *testing.T, opts Options) (s *Store, landing <-chan struct{}, release chan<- error) {
	t.Helper()
	arrived, let := make(chan struct{}), make(chan error)
	var held atomic.Bool
	opts.beforeLanding = func(err error) error {
		if !held.Load() {
			return err
		}
		arrived <- struct{}{}
		if swapped := <-let; swapped != nil {
			return swapped
		}
		return err
	}
	s, err := Open(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		held.Store(false)
		close(let)
		_ = s.Close()
	})
	held.Store(true)
	return s, arrived, let
}

// TestPipelinedCommit checks the batch filled while another is in flight:
// its functions read the writes of the one in flight before Badger shows
// them, and are answered only after both are synced; one that iterates
// over keys the batch in flight wrote runs again once it has landed, and
// then sees them.
func TestPipelinedCommit(t *testing.T) {
	t.Parallel()
	s, landing, release := holdLanding(t, Options{InMemory: true})
	ctx := t.Context()

	first := make(chan error, 1)
	go func() {
		first <- s.update(ctx, func(txn *tx) error {
			if err := txn.set([]byte("p/1"), []byte("one")); err != nil {
				return err
			}
			return txn.delete([]byte("gone"))
		})
	}()
	<-landing // the first batch is in flight

	var read string
	var deletedSeen bool
	var version uint64
	var versioned bool
	ran := make(chan struct{})
	second := make(chan error, 1)
	go func() {
		second <- s.update(ctx, func(txn *tx) error {
			defer close(ran)
			v, err := getRaw(txn, []byte("p/1"))
			if err != nil {
				return err
			}
			read = string(v)
			ok, err := exists(txn, []byte("gone"))
			deletedSeen = !ok
			if err != nil {
				return err
			}
			if version, versioned, err = txn.version([]byte("p/1")); err != nil {
				return err
			}
			return txn.set([]byte("p2/1"), append(v, "+two"...))
		})
	}()
	<-ran
	require.Equal(t, "one", read, "the batch being filled reads the one in flight")
	require.True(t, deletedSeen, "and its deletions")
	require.False(t, versioned, "a value in flight has no version yet (version %d)", version)
	select {
	case err := <-second:
		t.Fatalf("answered (%v) before the batch it read was synced", err)
	default:
	}
	_, found := value(t, s, "p/1")
	require.False(t, found, "reads see a batch only once it has landed")

	release <- nil // the first lands; the second goes
	require.NoError(t, <-first)
	<-landing
	release <- nil
	require.NoError(t, <-second)
	got, _ := value(t, s, "p2/1")
	require.Equal(t, "one+two", got)

	// A function iterating over what the batch in flight wrote runs
	// again once that batch has landed.
	go func() {
		first <- s.update(ctx, func(txn *tx) error { return txn.set([]byte("p/2"), []byte("two")) })
	}()
	<-landing
	var runs atomic.Int32
	var counted int
	go func() {
		second <- s.update(ctx, func(txn *tx) error {
			runs.Add(1)
			it := txn.iterator(badgerdb.IteratorOptions{Prefix: []byte("p/")})
			defer it.Close()
			counted = 0
			for it.Rewind(); it.Valid(); it.Next() {
				counted++
			}
			return txn.set([]byte("count"), []byte(fmt.Sprint(counted)))
		})
	}()
	for runs.Load() == 0 {
		time.Sleep(time.Millisecond) // a guard against a hang follows: the release below
	}
	release <- nil // p/2 lands; the counting function runs again
	require.NoError(t, <-first)
	<-landing
	release <- nil
	require.NoError(t, <-second)
	require.Equal(t, int32(2), runs.Load(), "run once in the shadow of the batch in flight, then again")
	require.Equal(t, 2, counted)
	got, _ = value(t, s, "count")
	require.Equal(t, "2", got)
}

// TestPipelinedCommitAfterAFailedBatch: when the batch in flight fails, the
// batch that read its writes runs again without them.
func TestPipelinedCommitAfterAFailedBatch(t *testing.T) {
	t.Parallel()
	s, landing, release := holdLanding(t, Options{InMemory: true})
	ctx := t.Context()
	first := make(chan error, 1)
	go func() {
		first <- s.update(ctx, func(txn *tx) error { return txn.set([]byte("a"), []byte("1")) })
	}()
	<-landing
	// The batch in flight is answered as failed (Badger's own failures
	// cannot be provoked on demand: the test swaps the result).
	var reads []string
	ran := make(chan struct{}, 2)
	second := make(chan error, 1)
	go func() {
		second <- s.update(ctx, func(txn *tx) error {
			v, err := getRaw(txn, []byte("a"))
			reads = append(reads, fmt.Sprintf("%s/%v", v, err != nil))
			ran <- struct{}{}
			return nil
		})
	}()
	<-ran
	release <- errors.New("disk on fire")
	require.ErrorContains(t, <-first, "disk on fire")
	<-ran
	<-landing
	release <- nil
	require.NoError(t, <-second)
	require.Equal(t, []string{"1/false", "/true"}, reads, "run again after the failure, without the failed batch's writes")
}

// TestLaterWrites: a write that can wait (updateLater) does not start a
// sync of its own while another write may come: it joins the next batch,
// or goes alone once it has waited long enough, or at Close.
func TestLaterWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// later queues a write that can wait; ran is closed once the
	// committer has run it (it holds it from then on).
	later := func(s *Store, key string) (ran <-chan struct{}, done <-chan error) {
		r, d := make(chan struct{}), make(chan error, 1)
		var once sync.Once
		go func() {
			d <- s.updateLater(ctx, func(txn *tx) error {
				once.Do(func() { close(r) })
				return txn.set([]byte(key), []byte("v"))
			})
		}()
		return r, d
	}

	t.Run("it joins the next write's batch", func(t *testing.T) {
		t.Parallel()
		s, err := Open(Options{InMemory: true, laterWait: time.Hour})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		before := commitVersion(s)
		ran, done := later(s, "outcome")
		<-ran
		_, found := value(t, s, "outcome")
		require.False(t, found, "held, not committed alone")
		require.NoError(t, s.update(ctx, func(txn *tx) error { return txn.set([]byte("create"), []byte("v")) }))
		require.NoError(t, <-done)
		require.Equal(t, before+1, commitVersion(s), "one transaction for both")
		_, found = value(t, s, "outcome")
		require.True(t, found)
	})
	t.Run("it goes alone when nothing comes", func(t *testing.T) {
		t.Parallel()
		s, err := Open(Options{InMemory: true, laterWait: time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		_, done := later(s, "alone")
		require.NoError(t, <-done)
		_, found := value(t, s, "alone")
		require.True(t, found)
	})
	t.Run("Close commits it", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		s, err := Open(Options{Dir: dir, laterWait: time.Hour})
		require.NoError(t, err)
		ran, done := later(s, "held")
		<-ran
		require.NoError(t, s.Close())
		require.NoError(t, <-done)
		s, err = Open(Options{Dir: dir})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		_, found := value(t, s, "held")
		require.True(t, found, "on disk after Close")
	})
}

// TestPipelinedCommitFullBatches: writes too large to share one batch,
// all waiting at once, fill several batches in turn, each handed to Badger
// only after the one before it has landed; every write is answered and on
// disk. (A batch handed over while another was in flight once left the
// first one's writers waiting for ever.)
func TestPipelinedCommitFullBatches(t *testing.T) {
	t.Parallel()
	s, err := Open(Options{Dir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	const n = 16
	big := bytes.Repeat([]byte("x"), 900<<10) // four to a batch (maxBatchBytes)
	release := blockCommitter(t, s)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- s.update(t.Context(), func(txn *tx) error {
				return txn.set([]byte(fmt.Sprintf("big/%02d", i)), big)
			})
		}()
	}
	waitQueued(t, s, n)
	release()
	guard := time.After(time.Minute) // a hang fails here, not in the test binary's timeout
	for range n {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-guard:
			t.Fatal("writes still unanswered: a batch in flight was forgotten")
		}
	}
	for i := range n {
		_, found := value(t, s, fmt.Sprintf("big/%02d", i))
		require.True(t, found, "write %d", i)
	}
}

// TestPipelinedCommitFailedBatchAtClose: a batch in flight fails while Close
// waits for it; the batch that read it runs again and, without the failed
// writes, no longer fits one transaction, so it goes as two. Every writer
// is answered and every write lands, one batch in flight at a time. (A
// single wait before handing a batch over once let the second of them go
// out over the first, whose writer was then never answered.)
func TestPipelinedCommitFailedBatchAtClose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, landing, release := holdLanding(t, Options{Dir: dir})
	ctx := t.Context()
	first := make(chan error, 1)
	go func() {
		first <- s.update(ctx, func(txn *tx) error { return txn.set([]byte("a"), []byte("1")) })
	}()
	<-landing // the first batch is in flight, held

	// x writes little while it sees a, and 2 MiB when it does not; y
	// writes 2.7 MiB. Together with a they fit one batch; without, not.
	ran := make(chan struct{}, 4)
	xDone, yDone := make(chan error, 1), make(chan error, 1)
	go func() {
		xDone <- s.update(ctx, func(txn *tx) error {
			defer func() { ran <- struct{}{} }()
			seen, err := exists(txn, []byte("a"))
			if err != nil {
				return err
			}
			if seen {
				return txn.set([]byte("x"), []byte("small"))
			}
			return txn.set([]byte("x"), bytes.Repeat([]byte("x"), 2<<20))
		})
	}()
	<-ran
	go func() {
		yDone <- s.update(ctx, func(txn *tx) error {
			defer func() { ran <- struct{}{} }()
			return txn.set([]byte("y"), bytes.Repeat([]byte("y"), 27<<17))
		})
	}()
	<-ran
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	<-s.commit.stop
	// Let the committer take the stop before the batch in flight lands
	// (the landing is the only other way out of its wait): the failure
	// should reach it while it hands the last batch over, the harder of
	// the two paths. Either path must pass.
	time.Sleep(10 * time.Millisecond)
	release <- errors.New("disk on fire")
	require.ErrorContains(t, <-first, "disk on fire")
	guard := time.After(time.Minute)
	for _, answered := range []chan error{xDone, yDone} {
	wait:
		for {
			select {
			case err := <-answered:
				require.NoError(t, err)
				break wait
			case <-landing:
				release <- nil
			case <-guard:
				t.Fatal("a writer was never answered")
			}
		}
	}
	require.NoError(t, <-closed)

	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for _, key := range []string{"x", "y"} {
		_, found := value(t, s, key)
		require.True(t, found, key)
	}
}

// TestBatchOfManyEntries: Badger bounds a transaction's entries as well as
// its bytes; a write that would take a batch past the count goes in the
// next batch instead of failing.
func TestBatchOfManyEntries(t *testing.T) {
	t.Parallel()
	s := openInMemory(t)
	const writers, keys = 8, 5_000 // 40,000 entries; an in-memory batch holds about 13,000
	release := blockCommitter(t, s)
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			errs <- s.update(t.Context(), func(txn *tx) error {
				for k := range keys {
					if err := txn.set([]byte(fmt.Sprintf("many/%d/%05d", w, k)), []byte("v")); err != nil {
						return err
					}
				}
				return nil
			})
		}()
	}
	waitQueued(t, s, writers)
	release()
	for range writers {
		require.NoError(t, <-errs)
	}
	for w := range writers {
		_, found := value(t, s, fmt.Sprintf("many/%d/%05d", w, keys-1))
		require.True(t, found, "writer %d", w)
	}
}

// TestPlanHoldsUntilItsRecordsChange: a create's plan, made outside the
// committer, holds in its batch until its patient, user or organization
// changes: in a batch that landed after the plan read, or earlier in its
// own batch. A write of another patient, or of anything else, leaves it
// holding (after anything but a patient, user or organization its records
// are not even read again: the store marks which kinds of keys a batch
// wrote).
func TestPlanHoldsUntilItsRecordsChange(t *testing.T) {
	t.Parallel()
	type where int
	const (
		landed where = iota
		inBatch
	)
	tests := []struct {
		name  string
		key   func(w *plannedWorld) []byte
		where where
		holds bool
	}{
		{"patient, landed", func(w *plannedWorld) []byte { return patientKey(w.org, w.user, w.patient) }, landed, false},
		{"user, landed", func(w *plannedWorld) []byte { return userKey(w.org, w.user) }, landed, false},
		{"organization, landed", func(w *plannedWorld) []byte { return organizationKey(w.org) }, landed, false},
		{"patient, in the batch", func(w *plannedWorld) []byte { return patientKey(w.org, w.user, w.patient) }, inBatch, false},
		{"organization, in the batch", func(w *plannedWorld) []byte { return organizationKey(w.org) }, inBatch, false},
		// Its records are read again, and have not changed.
		{"another patient, landed", func(w *plannedWorld) []byte { return patientKey(w.org, w.user, storage.NewID()) }, landed, true},
		{"something else, landed", func(*plannedWorld) []byte { return []byte("x/else") }, landed, true},
		{"something else, in the batch", func(*plannedWorld) []byte { return []byte("x/else") }, inBatch, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openInMemory(t)
			ctx := t.Context()
			w := newPlannedWorld(t, s, true)
			rx := storage.Prescription{OrgID: w.org, UserID: w.user, PatientID: w.patient}
			rx.PrepareCreate(time.Now())
			var plan *createPlan
			require.NoError(t, s.view(ctx, func(txn *tx) (err error) {
				plan, err = s.planCreate(txn, rx, time.Now())
				return err
			}))
			write := func() error {
				return s.update(ctx, func(txn *tx) error { return txn.set(tt.key(w), []byte("changed")) })
			}
			var holds bool
			check := func() error {
				return s.update(ctx, func(txn *tx) (err error) {
					holds, err = plan.holds(s, txn)
					return err
				})
			}
			switch tt.where {
			case landed:
				require.NoError(t, write())
				require.NoError(t, check())
			case inBatch:
				release := blockCommitter(t, s)
				var wg sync.WaitGroup
				wg.Go(func() { assert.NoError(t, write()) })
				waitQueued(t, s, 1)
				wg.Go(func() { assert.NoError(t, check()) })
				waitQueued(t, s, 2)
				release()
				wg.Wait()
			}
			require.Equal(t, tt.holds, holds)
		})
	}
}

// TestWaitingWrites: WaitingWrites counts the writes queued by update
// until each is answered (the one the committer runs, those queued behind
// it), and not those queued by updateLater, which ride others' batches.
func TestWaitingWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := Open(Options{InMemory: true, laterWait: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.Zero(t, s.WaitingWrites())
	release := blockCommitter(t, s)
	require.Equal(t, 1, s.WaitingWrites(), "the write the committer runs")
	done := make(chan error, 3)
	for i := range 2 {
		go func() {
			done <- s.update(ctx, func(txn *tx) error { return txn.set(fmt.Appendf(nil, "create/%d", i), []byte("v")) })
		}()
	}
	go func() {
		done <- s.updateLater(ctx, func(txn *tx) error { return txn.set([]byte("outcome"), []byte("v")) })
	}()
	waitQueued(t, s, 3)
	assert.Equal(t, 3, s.WaitingWrites(), "the later write is not counted")
	release()
	for range 3 {
		require.NoError(t, <-done)
	}
	assert.Zero(t, s.WaitingWrites(), "every write answered")
}
