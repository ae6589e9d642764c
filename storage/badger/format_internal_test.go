package badger

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// rawFormat reads the format key of the closed store in dir with Badger
// alone, so that nothing of this package's Open runs.
func rawFormat(t *testing.T, dir string) string {
	v, _ := rawRead(t, dir)
	return v
}

// rawRead returns the format key of the closed store in dir ("" when
// absent) and how many event payloads have their own key, read with Badger
// alone.
func rawRead(t *testing.T, dir string) (format string, split int) {
	t.Helper()
	db, err := badgerdb.OpenManaged(badgerdb.DefaultOptions(dir).WithLogger(nil))
	require.NoError(t, err)
	defer db.Close()
	txn := db.NewTransactionAt(db.MaxVersion(), false)
	defer txn.Discard()
	it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte(prefixEventPayload)})
	for it.Rewind(); it.Valid(); it.Next() {
		if !it.Item().IsDeletedOrExpired() {
			split++
		}
	}
	it.Close()
	item, err := txn.Get(metaKey(metaFormat))
	if err == badgerdb.ErrKeyNotFound {
		return "", split
	}
	require.NoError(t, err)
	v, err := item.ValueCopy(nil)
	require.NoError(t, err)
	return string(v), split
}

// TestFormatVersion: a new store records this code's format; a store of a
// newer format is refused with a line giving both versions, and left as
// it was.
func TestFormatVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Equal(t, strconv.Itoa(formatVersion), rawFormat(t, dir), "a new store records its format")

	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, s.setFormat(t.Context(), formatVersion+1))
	require.NoError(t, s.Close())
	_, err = Open(Options{Dir: dir})
	require.ErrorIs(t, err, ErrNewerFormat)
	require.ErrorContains(t, err, fmt.Sprintf("format version %d, and this rxgate reads versions up to %d", formatVersion+1, formatVersion))
	require.Equal(t, strconv.Itoa(formatVersion+1), rawFormat(t, dir), "a refused store is not written")
}

// legacyStore makes a format-1 store in dir with n events (payloads in
// their records, no format key) and returns each event's payload.
func legacyStore(t *testing.T, dir string, n int) map[string][]byte {
	t.Helper()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	ctx := t.Context()
	rx, _ := queueWorld(t, s)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				p := rx
				p.ItemName = "Item " + strconv.Itoa(i)
				if err := s.CreatePrescription(ctx, &p); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	payloads := map[string][]byte{}
	var all []storage.Event
	for cursor := ""; ; {
		page, info, err := s.ListEvents(ctx, storage.EventFilter{}, storage.PageRequest{Limit: 100, Cursor: cursor})
		require.NoError(t, err)
		all = append(all, page...)
		if info.LastKey == "" {
			break
		}
		cursor = info.LastKey
	}
	require.Len(t, all, n)
	for start := 0; start < len(all); start += 200 {
		require.NoError(t, s.update(ctx, func(txn *tx) error {
			for _, ev := range all[start:min(start+200, len(all))] {
				payloads[ev.ID] = ev.Payload
				if err := writeFormat1(txn, &ev); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	require.NoError(t, s.update(ctx, func(txn *tx) error { return txn.delete(metaKey(metaFormat)) }))
	require.NoError(t, s.Close())
	return payloads
}

// writeFormat1 rewrites ev as format 1 kept it: the payload inside the
// record, no payload key, no partner indexes (format 3).
func writeFormat1(txn *tx, ev *storage.Event) error {
	r := fromEvent(ev)
	r.Payload = ev.Payload
	if err := putRecord(txn, eventKey(ev.ID), r); err != nil {
		return err
	}
	for _, k := range [][]byte{eventPayloadKey(ev.ID), eventPartnerKey(ev.PartnerID, ev.ID), eventPartnerStatusKey(ev.PartnerID, ev.Status, ev.ID)} {
		if err := txn.delete(k); err != nil {
			return err
		}
	}
	return nil
}

// TestFormatPartnerIndex: a store of an older format, without partner
// indexes, gets them when opened (format 3): its events list by partner,
// and by partner and status.
func TestFormatPartnerIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 600 // more than one migration batch
	payloads := legacyStore(t, dir, n)
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	require.Equal(t, strconv.Itoa(formatVersion), func() string {
		var v string
		require.NoError(t, s.view(t.Context(), func(txn *tx) error {
			return txn.value(metaKey(metaFormat), func(b []byte) error { v = string(b); return nil })
		}))
		return v
	}())
	ev, err := s.GetEvent(t.Context(), func() string {
		for id := range payloads {
			return id
		}
		return ""
	}())
	require.NoError(t, err)
	count := func(f storage.EventFilter) int {
		total := 0
		for cursor := ""; ; {
			page, info, err := s.ListEvents(t.Context(), f, storage.PageRequest{Limit: 100, Cursor: cursor})
			require.NoError(t, err)
			total += len(page)
			if info.LastKey == "" {
				return total
			}
			cursor = info.LastKey
		}
	}
	require.Equal(t, n, count(storage.EventFilter{PartnerID: ev.PartnerID}))
	require.Equal(t, n, count(storage.EventFilter{PartnerID: ev.PartnerID, Status: ev.Status}))
}

// splitCount counts the events of the store whose payload has its own key.
func splitCount(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	require.NoError(t, s.view(t.Context(), func(txn *tx) error {
		scanKeys(txn, []byte(prefixEventPayload), func([]byte) { n++ })
		return nil
	}))
	return n
}

// migrationChildDir names the store the helper process opens.
const migrationChildDir = "RXGATE_TEST_MIGRATION_CHILD_DIR"

// TestMigrationChild is the process TestMigrationSurvivesKill kills: it
// opens the store, migrating it, and stops after the third batch until
// it is killed.
func TestMigrationChild(t *testing.T) {
	dir := os.Getenv(migrationChildDir)
	if dir == "" {
		t.Skip("the helper process of TestMigrationSurvivesKill")
	}
	batches := 0
	_, _ = Open(Options{Dir: dir, afterMigrationBatch: func() {
		batches++
		fmt.Printf("batch %d\n", batches)
		if batches == 3 {
			time.Sleep(time.Hour) // killed here
		}
	}})
}

// TestMigrationSurvivesKill kills a process with SIGKILL in the middle of
// a format migration (three of its batches committed, the rest not), and
// the next Open finishes it: every event reads with its payload, and the
// store records the new format.
func TestMigrationSurvivesKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const events = 1200 // about five batches of 256
	payloads := legacyStore(t, dir, events)
	require.Empty(t, rawFormat(t, dir), "a format-1 store has no format key")

	cmd := exec.Command(os.Args[0], "-test.run=^TestMigrationChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), migrationChildDir+"="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "batch 3" {
	}
	require.Equal(t, "batch 3", sc.Text(), "the helper reached its third batch")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	format, split := rawRead(t, dir)
	require.Empty(t, format, "the format is raised only when the migration has finished")
	require.GreaterOrEqual(t, split, 3*256, "three batches were committed before the kill")
	require.Less(t, split, events, "the kill came before the migration ended")

	s, err := Open(Options{Dir: dir, afterMigrationBatch: func() {}})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, events, splitCount(t, s), "every payload has its own key")
	ctx := context.Background()
	for id, want := range payloads {
		ev, err := s.GetEvent(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, ev.Payload, "event %s", id)
	}
	require.NoError(t, s.view(ctx, func(txn *tx) error {
		var r eventRecord
		for id := range payloads {
			require.NoError(t, getRecord(txn, eventKey(id), &r))
			require.Nil(t, r.Payload, "no record keeps its payload")
		}
		return nil
	}))
	require.NoError(t, s.Close())
	require.Equal(t, strconv.Itoa(formatVersion), rawFormat(t, dir))
}
