package badger

// What the store, and its journal, assume of Badger v4: each test names
// an assumption, read in Badger's source (db.go, memtable.go, value.go,
// levels.go, manifest.go, table/table.go), and fails if a Badger upgrade
// changes the behaviour. They open Badger itself with the store's options
// (diskOptions). "Synced" is observed as pages the page cache no longer
// holds dirty (dirtyPages; Linux and root, else that part is skipped).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pinKey is the i-th key the pin tests write.
func pinKey(i int) []byte { return fmt.Appendf(nil, "pin/%06d", i) }

// pinValue is a value of n bytes.
func pinValue(n int) []byte { return bytes.Repeat([]byte{'v'}, n) }

// openPin opens Badger in dir with the store's options and a small
// memtable (the smallest that takes a value under the threshold: 15% of
// it is the largest batch), so that a test fills one with little, and a
// small value log, which copyDir copies whole.
func openPin(t *testing.T, dir string, syncWrites bool) *badgerdb.DB {
	t.Helper()
	db, err := badgerdb.Open(diskOptions(dir, syncWrites).WithLogger(nil).WithMemTableSize(8 << 20).WithValueLogFileSize(4 << 20))
	require.NoError(t, err)
	return db
}

// pinPut writes one key in its own transaction.
func pinPut(t *testing.T, db *badgerdb.DB, key, value []byte) {
	t.Helper()
	require.NoError(t, db.Update(func(txn *badgerdb.Txn) error { return txn.Set(key, value) }))
}

// filesOf lists dir's files whose names end in ext.
func filesOf(t *testing.T, dir, ext string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ext) {
			out = append(out, e.Name())
		}
	}
	return out
}

// copyDir copies dir's files to a new directory, leaving out those
// skip says, as they are in the page cache: what a process crash leaves.
func copyDir(t *testing.T, dir string, skip func(name string) bool) string {
	t.Helper()
	out := t.TempDir()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "LOCK" || (skip != nil && skip(e.Name())) {
			continue
		}
		src, err := os.Open(filepath.Join(dir, e.Name()))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		dst, err := os.Create(filepath.Join(out, e.Name()))
		require.NoError(t, err)
		_, err = io.Copy(dst, src)
		require.NoError(t, err)
		require.NoError(t, src.Close())
		require.NoError(t, dst.Close())
	}
	return out
}

// requireKeys checks that db holds keys 0 to n-1.
func requireKeys(t *testing.T, db *badgerdb.DB, n int) {
	t.Helper()
	require.NoError(t, db.View(func(txn *badgerdb.Txn) error {
		for i := range n {
			if _, err := txn.Get(pinKey(i)); err != nil {
				return fmt.Errorf("key %d: %w", i, err)
			}
		}
		return nil
	}))
}

// requireClean checks that no page of the files of dir ending in ext is
// dirty; it reports false when the probe cannot tell.
func requireClean(t *testing.T, dir, ext string) bool {
	t.Helper()
	for _, name := range filesOf(t, dir, ext) {
		n, ok, err := dirtyPages(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		require.NoError(t, err)
		if !ok {
			t.Log("dirty pages cannot be read here (Linux and root only): the sync is not checked")
			return false
		}
		assert.Zero(t, n, "%s: dirty pages", name)
	}
	return true
}

// waitFor polls cond until it holds; a generous bound fails a Badger that
// never does it, and is no assertion on its speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Badger never did it: %s", what)
		}
	}
}

// TestBadgerOpenReplaysMemtableLogs pins: Badger's Open replays its
// memtable logs (NNNNN.mem), as a crashed process left them in the page
// cache. The journal relies on it after a process crash (package journal:
// "after the process dies its page cache has every batch"), and the
// store's Open, in either durability, syncs those logs before it serves
// (syncBadger): what Badger reopened is what a reader sees. It also pins
// that a commit that has returned is in a memtable log named *.mem, the
// names the journal's checkpointer and SyncFiles look for.
func TestBadgerOpenReplaysMemtableLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openPin(t, dir, false)
	defer db.Close()
	for i := range 100 {
		pinPut(t, db, pinKey(i), pinValue(100))
	}
	require.NotEmpty(t, filesOf(t, dir, ".mem"))
	assert.Empty(t, filesOf(t, dir, ".sst"), "nothing written to a table yet")
	// A crash: the files as they are now, without Close.
	crashed := openPin(t, copyDir(t, dir, nil), false)
	defer crashed.Close()
	requireKeys(t, crashed, 100)
}

// TestBadgerRemovesMemtableLogAfterSyncedTable pins the ordering the
// journal's checkpointer relies on to retire a segment without syncing
// Badger's memtable logs (checkpoint): a memtable's log is removed only
// after its table is written and synced (table.CreateTable msyncs it) and
// recorded in the MANIFEST, synced (manifestFile.addChanges). Once the
// log is gone, the table and the MANIFEST hold every write of it: a copy
// of the directory without any memtable log has them all, and neither
// file has a dirty page. Badger does not sync the directory after it
// creates the table's file (ristretto v2.2.0's z.OpenMmapFileUsing means
// to, but tests the file's size after setting it, so never does; the
// same holds for a new memtable log): the checkpointer syncs it
// (SyncFiles) before it retires a segment. A directory's sync cannot be
// observed this way, so the test does not ask it of Badger.
func TestBadgerRemovesMemtableLogAfterSyncedTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openPin(t, dir, false)
	defer db.Close()
	first := filesOf(t, dir, ".mem")
	require.Len(t, first, 1)
	// Fill the first memtable (8 MiB), and one write more starts the
	// next: the first is then written to a table. Nothing else writes.
	n := 0
	for slices.Equal(filesOf(t, dir, ".mem"), first) {
		pinPut(t, db, pinKey(n), pinValue(4000))
		n++
		require.Less(t, n, 10_000, "the memtable never filled")
	}
	gone := func() bool { return !slices.Contains(filesOf(t, dir, ".mem"), first[0]) }
	waitFor(t, "remove the full memtable's log", gone)
	require.NotEmpty(t, filesOf(t, dir, ".sst"))
	requireClean(t, dir, ".sst")
	requireClean(t, dir, "MANIFEST")
	// Without any memtable log: the table and the MANIFEST have the
	// first memtable's writes (all but the last, which began the next).
	tables := openPin(t, copyDir(t, dir, func(name string) bool { return strings.HasSuffix(name, ".mem") }), false)
	defer tables.Close()
	requireKeys(t, tables, n-1)
}

// TestBadgerSyncCoversActiveMemtableLog pins what db.Sync covers, which
// the store's syncBadger calls first: the active memtable's log (and the
// value log). It does not cover the logs of memtables waiting to be
// written to tables (db.imm): syncBadger fsyncs every *.mem file itself
// for them. Without a sync the page written is dirty, which shows the
// probe sees it; after db.Sync it is clean.
func TestBadgerSyncCoversActiveMemtableLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openPin(t, dir, false)
	defer db.Close()
	pinPut(t, db, pinKey(0), pinValue(100))
	mems := filesOf(t, dir, ".mem")
	require.Len(t, mems, 1)
	n, ok, err := dirtyPages(filepath.Join(dir, mems[0]))
	require.NoError(t, err)
	if !ok {
		t.Skip("dirty pages cannot be read here (Linux and root only)")
	}
	if n == 0 {
		t.Skip("the kernel wrote the page back already: the probe cannot tell a sync from it")
	}
	require.NoError(t, db.Sync())
	requireClean(t, dir, ".mem")
}

// TestBadgerSyncWritesSyncsEachCommit pins what DurabilitySyncWrites
// rests on: with SyncWrites, a commit returns only once its memtable log
// is synced (db.writeToLSM calls SyncWAL, and the value log's write syncs
// it), so that an acknowledged write survives a power cut without the
// journal.
func TestBadgerSyncWritesSyncsEachCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openPin(t, dir, true)
	defer db.Close()
	for i := range 20 {
		pinPut(t, db, pinKey(i), pinValue(300))
		if !requireClean(t, dir, ".mem") {
			t.Skip("dirty pages cannot be read here (Linux and root only)")
		}
		requireClean(t, dir, ".vlog")
	}
}

// TestBadgerValueThresholdKeepsValuesInLSM pins the rest of defect B
// (issue 26): a value under the value threshold (valueThreshold, which
// the store's record bound stays under) is kept inline in the memtable
// log and the tables, and nothing reaches the value log, which the
// journal does not make durable and whose garbage collection CollectGarbage
// does not run under the journal. A value at the threshold does go to the
// value log, which shows the test sees it.
func TestBadgerValueThresholdKeepsValuesInLSM(t *testing.T) {
	t.Parallel()
	vlogSize := func(value int) int64 {
		dir := t.TempDir()
		db := openPin(t, dir, false)
		if value > 0 {
			pinPut(t, db, pinKey(0), pinValue(value))
		}
		require.NoError(t, db.Close()) // truncates the value log to its end
		var size int64
		for _, name := range filesOf(t, dir, ".vlog") {
			info, err := os.Stat(filepath.Join(dir, name))
			require.NoError(t, err)
			size += info.Size()
		}
		return size
	}
	empty := vlogSize(0)
	assert.Equal(t, empty, vlogSize(valueThreshold-1), "a value under the threshold reached the value log")
	assert.Greater(t, vlogSize(valueThreshold), empty+valueThreshold-1, "a value at the threshold goes to the value log")
}

// TestBadgerCloseWritesMemtablesToTables pins what the journal's clean
// Close relies on to retire every segment (Journal.Close with clean set):
// Badger's Close writes every memtable to a table, so that the tables and
// the MANIFEST alone hold every write, synced.
func TestBadgerCloseWritesMemtablesToTables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openPin(t, dir, false)
	for i := range 100 {
		pinPut(t, db, pinKey(i), pinValue(100))
	}
	require.NoError(t, db.Close())
	requireClean(t, dir, ".sst")
	requireClean(t, dir, "MANIFEST")
	tables := openPin(t, copyDir(t, dir, func(name string) bool { return strings.HasSuffix(name, ".mem") }), false)
	defer tables.Close()
	requireKeys(t, tables, 100)
}

// TestCollectGarbageByDurability checks the other half of defect B (issue
// 26): under the journal, CollectGarbage never runs Badger's value-log
// garbage collection, which would write the entries it keeps through
// Badger's unsynced path and remove the old value log at once; under
// SyncWrites, where Badger syncs that rewrite before it removes anything
// (its batchSet goes through the synced write path, pinned by
// TestBadgerSyncWritesSyncsEachCommit), it runs.
func TestCollectGarbageByDurability(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		durability Durability
		runs       bool
	}{
		{DurabilityJournal, false},
		{DurabilitySyncWrites, true},
	} {
		t.Run(string(tt.durability), func(t *testing.T) {
			t.Parallel()
			s, err := Open(Options{Dir: t.TempDir(), Durability: tt.durability})
			require.NoError(t, err)
			defer s.Close()
			runs := 0
			s.gcHook = func(float64) { runs++ }
			require.NoError(t, s.update(context.Background(), func(txn *tx) error { return txn.set([]byte("k"), []byte("v")) }))
			require.NoError(t, s.CollectGarbage())
			assert.Equal(t, tt.runs, runs > 0)
		})
	}
}

// TestSyncWritesOpenSyncsWhatBadgerReopened is defect A (issue 26, seen
// then gone) under DurabilitySyncWrites: after a process crash, Badger
// reopens its memtable logs as the page cache holds them, with batches
// whose msync never finished; the store must sync them before it serves
// them. The crashed process's files are a copy of a live directory (its
// pages are dirty, as such a batch's would be); once the store has
// opened, no page of its memtable or value logs is dirty.
func TestSyncWritesOpenSyncsWhatBadgerReopened(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := openPin(t, dir, false)
	defer db.Close()
	for i := range 100 {
		pinPut(t, db, pinKey(i), pinValue(100))
	}
	crashed := copyDir(t, dir, nil)
	mems := filesOf(t, crashed, ".mem")
	require.NotEmpty(t, mems)
	n, ok, err := dirtyPages(filepath.Join(crashed, mems[0]))
	require.NoError(t, err)
	if !ok {
		t.Skip("dirty pages cannot be read here (Linux and root only)")
	}
	if n == 0 {
		t.Skip("the kernel wrote the copy back already: the probe cannot tell a sync from it")
	}
	s, err := Open(Options{Dir: crashed, Durability: DurabilitySyncWrites})
	require.NoError(t, err)
	defer s.Close()
	requireClean(t, crashed, ".mem")
	requireClean(t, crashed, ".vlog")
	requireKeys(t, s.db, 100)
}
