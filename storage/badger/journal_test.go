package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger/journal"
)

// crash stops s as a power cut would find it: Badger keeps only what it
// was given (its tables), the journal keeps every segment it has.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.closeCommitter()
	s.advice.close()
	s.journal.Halt()
	require.NoError(t, s.journal.Close(false))
	require.NoError(t, s.db.Close())
}

func put(t *testing.T, s *Store, key, v string) {
	t.Helper()
	require.NoError(t, s.update(context.Background(), func(txn *tx) error { return txn.set([]byte(key), []byte(v)) }))
}

// crashWithLostWrite writes key=v to a store in dir that Badger never
// gets, as a power cut right after the answer would leave it, and crashes.
func crashWithLostWrite(t *testing.T, dir string, encryptionKey []byte, key, v string) {
	t.Helper()
	s, err := Open(Options{Dir: dir, EncryptionKey: encryptionKey, dropCommit: func(uint64) bool { return true }})
	require.NoError(t, err)
	put(t, s, key, v)
	crash(t, s)
}

// hasValue checks that key holds want.
func hasValue(t *testing.T, s *Store, key, want string) {
	t.Helper()
	got, ok := value(t, s, key)
	assert.True(t, ok, "%s is there", key)
	assert.Equal(t, want, got, key)
}

func del(t *testing.T, s *Store, key string) {
	t.Helper()
	require.NoError(t, s.update(context.Background(), func(txn *tx) error { return txn.delete([]byte(key)) }))
}

// journalFiles lists the journal's segments and free segments, by the
// names the journal's package comment gives them (N.wal, free-N.wal).
func journalFiles(t *testing.T, dir string) (segments, free []string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, journal.Dir))
	require.NoError(t, err)
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), "free-"):
			free = append(free, e.Name())
		case strings.HasSuffix(e.Name(), ".wal"):
			segments = append(segments, e.Name())
		}
	}
	return segments, free
}

// TestJournalReplaysWhatBadgerLost holds batches back from Badger, as a
// power cut loses the unsynced end of its log, and checks that a reopened
// store has every acknowledged write, the newest version of each key: a
// deletion Badger lost does not bring back what it deleted, and a write
// Badger kept is not undone by an older one replayed.
func TestJournalReplaysWhatBadgerLost(t *testing.T) {
	type step struct {
		key, value string // value "" deletes
		lost       bool   // Badger never gets the batch
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  map[string]string // "" absent
	}{
		{"every batch lost", []step{{"a", "1", true}, {"b", "2", true}, {"a", "3", true}},
			map[string]string{"a": "3", "b": "2"}},
		{"a lost deletion", []step{{"a", "1", false}, {"a", "", true}},
			map[string]string{"a": ""}},
		{"a lost write between kept ones", []step{{"a", "1", false}, {"a", "2", true}, {"b", "1", false}},
			map[string]string{"a": "2", "b": "1"}},
		{"kept writes after a lost one", []step{{"a", "1", true}, {"a", "2", false}, {"a", "", false}, {"b", "1", false}},
			map[string]string{"a": "", "b": "1"}},
		{"nothing lost", []step{{"a", "1", false}, {"a", "", false}, {"a", "2", false}},
			map[string]string{"a": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var lose atomic.Bool
			s, err := Open(Options{Dir: dir, dropCommit: func(uint64) bool { return lose.Load() }})
			require.NoError(t, err)
			for _, st := range tc.steps {
				lose.Store(st.lost)
				if st.value == "" {
					del(t, s, st.key)
				} else {
					put(t, s, st.key, st.value)
				}
			}
			lose.Store(false)
			crash(t, s)

			s, err = Open(Options{Dir: dir})
			require.NoError(t, err)
			defer s.Close()
			for k, want := range tc.want {
				if want == "" {
					_, ok := value(t, s, k)
					assert.False(t, ok, "%s is deleted", k)
					continue
				}
				hasValue(t, s, k, want)
			}
			// The store goes on from there: a new write and the old ones.
			put(t, s, "after", "x")
			hasValue(t, s, "after", "x")
		})
	}
}

// TestJournalBatchThatWroteNothing crashes right after a batch whose
// transactions wrote nothing, then crashes the restarted process after a
// write of its own: the store must open, with both writes. A record of
// the empty batch once made the restarted process take its timestamp
// again (Badger kept no version at it), and the next start refused the
// journal as out of order (make powercut, crash-then-cut).
func TestJournalBatchThatWroteNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	put(t, s, "a", "1")
	require.NoError(t, s.update(context.Background(), func(*tx) error { return nil }))
	crash(t, s)

	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	put(t, s, "b", "2")
	crash(t, s)

	s, err = Open(Options{Dir: dir})
	require.NoError(t, err, "the store opens after the second crash")
	defer s.Close()
	hasValue(t, s, "a", "1")
	hasValue(t, s, "b", "2")
}

// TestJournalSegmentsAreRetired fills many small segments and checks that
// the checkpointer retires them (the journal does not grow), that a crash
// after it loses nothing, and that a clean Close leaves no segment to
// replay.
func TestJournalSegmentsAreRetired(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, journalSegment: 64 << 10})
	require.NoError(t, err)
	v := strings.Repeat("v", 6000)
	const n = 200 // about 20 segments
	for i := range n {
		put(t, s, fmt.Sprintf("k%03d", i), fmt.Sprintf("%s%d", v, i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		segments, free := journalFiles(t, dir)
		if len(segments) <= 2 {
			// The journal keeps two free segments (its freeKeep), and may
			// make a spare.
			assert.LessOrEqual(t, len(free), 2+1, "free segments are bounded")
			break
		}
		require.True(t, time.Now().Before(deadline), "segments retired: %v", segments)
		time.Sleep(time.Millisecond)
	}
	crash(t, s)

	s, err = Open(Options{Dir: dir, journalSegment: 64 << 10})
	require.NoError(t, err)
	for i := range n {
		got, ok := value(t, s, fmt.Sprintf("k%03d", i))
		require.True(t, ok, i)
		require.Equal(t, fmt.Sprintf("%s%d", v, i), got)
	}
	require.NoError(t, s.Close())
	segments, _ := journalFiles(t, dir)
	assert.Empty(t, segments, "a clean close leaves nothing to replay")

	// A segment half made when the process stopped is removed at start.
	tmp := filepath.Join(dir, journal.Dir, "00000000000000ff.wal.tmp")
	require.NoError(t, os.WriteFile(tmp, make([]byte, 100), 0o600))
	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.NoFileExists(t, tmp)
}

// TestJournalEncrypted checks that an encrypted store's journal holds no
// value in clear, and that its records replay.
func TestJournalEncrypted(t *testing.T) {
	dir := t.TempDir()
	key := bytes.Repeat([]byte{1}, 32)
	crashWithLostWrite(t, dir, key, "patient", "Ada Lovelace, 1815-12-10")
	segments, _ := journalFiles(t, dir)
	require.NotEmpty(t, segments)
	for _, name := range segments {
		data, err := os.ReadFile(filepath.Join(dir, journal.Dir, name))
		require.NoError(t, err)
		assert.NotContains(t, string(data), "Lovelace")
	}
	_, err := Open(Options{Dir: dir})
	assert.Error(t, err, "no key, no replay")

	s, err := Open(Options{Dir: dir, EncryptionKey: key})
	require.NoError(t, err)
	defer s.Close()
	hasValue(t, s, "patient", "Ada Lovelace, 1815-12-10")
}

// TestRotateKeyAfterACrash checks that a key rotated after a crash keeps
// the journal's records, which were sealed under the old key.
func TestRotateKeyAfterACrash(t *testing.T) {
	dir := t.TempDir()
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	crashWithLostWrite(t, dir, oldKey, "patient", "Ada")
	require.ErrorContains(t, RotateKey(dir, newKey, newKey), "old key", "a wrong old key")
	require.NoError(t, RotateKey(dir, oldKey, newKey))
	_, free := journalFiles(t, dir)
	assert.Empty(t, free, "no record of an earlier life under the old key")

	s, err := Open(Options{Dir: dir, EncryptionKey: newKey})
	require.NoError(t, err)
	defer s.Close()
	hasValue(t, s, "patient", "Ada")
}

// TestJournalFailureRefusesWrites checks that once the journal has failed
// every write is refused and the store reports it, while reads go on. A
// write that fails the journal is package journal's
// (TestAppendAfterAFailedWrite).
func TestJournalFailureRefusesWrites(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()
	put(t, s, "a", "1")
	_ = s.journal.Fail(errors.New("a write failed"))
	err = s.update(context.Background(), func(txn *tx) error { return txn.set([]byte("b"), []byte("2")) })
	require.ErrorContains(t, err, "journal failed")
	err = s.update(context.Background(), func(txn *tx) error { return txn.set([]byte("c"), []byte("3")) })
	require.ErrorContains(t, err, "journal failed", "and stays failed")
	assert.ErrorContains(t, s.Ping(context.Background()), "journal failed")
	hasValue(t, s, "a", "1")
	_, ok := value(t, s, "b")
	assert.False(t, ok)
}

// TestJournalCorruptionFailsOpen checks that a store whose journal holds a
// damaged record with acknowledged ones after it does not open, and says
// which segment and where (defect C of issue 26), instead of opening
// without them.
func TestJournalCorruptionFailsOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, dropCommit: func(uint64) bool { return true }})
	require.NoError(t, err)
	for _, k := range []string{"a", "b", "c"} {
		put(t, s, k, "v")
	}
	crash(t, s)
	segments, _ := journalFiles(t, dir)
	var damaged string
	for _, name := range segments {
		path := filepath.Join(dir, journal.Dir, name)
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		if bytes.Count(data[8192:8192+64], []byte{0}) < 64 { // a second record
			data[4096+40] ^= 0xff // in the first
			require.NoError(t, os.WriteFile(path, data, 0o600))
			damaged = name
		}
	}
	require.NotEmpty(t, damaged)

	_, err = Open(Options{Dir: dir})
	require.ErrorIs(t, err, journal.ErrCorrupt)
	what := "segment " + filepath.Join(journal.Dir, damaged) + ": corrupt at offset 4096"
	assert.Contains(t, err.Error(), what)
	assert.Contains(t, err.Error(), "storage.journal_skip_corrupt", "it says how to go on")

	// Told to, the store opens without the damaged record, and logs it.
	var logged bytes.Buffer
	s, err = Open(Options{Dir: dir, JournalSkipCorrupt: true, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.NoError(t, err)
	defer s.Close()
	hasValue(t, s, "c", "v")
	assert.Contains(t, logged.String(), "level=ERROR")
	assert.Contains(t, logged.String(), what)
}

// TestValuesStayUnderTheValueThreshold checks that no record reaches
// Badger's value log (issue 26, defect B): Badger's threshold is pinned,
// and with the largest record bound a record at the threshold is refused
// as too large, while one just under it is stored.
func TestValuesStayUnderTheValueThreshold(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), MaxRecordBytes: MaxRecordLimit})
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, int64(valueThreshold), s.db.Opts().ValueThreshold)
	assert.GreaterOrEqual(t, int64(MaxRecordLimit), s.db.Opts().ValueThreshold, "the bound alone would reach it")
	put := func(key string, n int) error {
		// A record of n bytes: its version byte and a JSON string.
		v := strings.Repeat("v", n-3)
		return s.update(context.Background(), func(txn *tx) error { return putRecord(txn, []byte(key), v) })
	}
	require.ErrorIs(t, put("at", valueThreshold), storage.ErrTooLarge)
	_, ok := value(t, s, "at")
	assert.False(t, ok, "nothing stored")
	require.NoError(t, put("under", valueThreshold-1))
	_, ok = value(t, s, "under")
	assert.True(t, ok)
}

// TestSyncWritesReplaysALeftJournal switches a store from the journal to
// SyncWrites after a crash (issue 26, item 5): the journal's acknowledged
// batch that Badger never got is replayed when the store opens with
// DurabilitySyncWrites, the journal is emptied, and the store, opened
// again without a journal, still has it.
func TestSyncWritesReplaysALeftJournal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	crashWithLostWrite(t, dir, nil, "lost", "v1")
	segments, _ := journalFiles(t, dir)
	require.NotEmpty(t, segments)

	s, err := Open(Options{Dir: dir, Durability: DurabilitySyncWrites})
	require.NoError(t, err)
	assert.Nil(t, s.journal, "no journal under syncwrites")
	hasValue(t, s, "lost", "v1")
	put(t, s, "after", "v2")
	segments, _ = journalFiles(t, dir)
	assert.Empty(t, segments, "the journal is emptied once Badger has its records durably")
	require.NoError(t, s.Close())

	s, err = Open(Options{Dir: dir, Durability: DurabilitySyncWrites})
	require.NoError(t, err)
	defer s.Close()
	hasValue(t, s, "lost", "v1")
	hasValue(t, s, "after", "v2")
}

// TestOpenRefusesAnUnknownDurability checks that a durability Open does
// not know is refused, not taken for the default.
func TestOpenRefusesAnUnknownDurability(t *testing.T) {
	t.Parallel()
	_, err := Open(Options{Dir: t.TempDir(), Durability: "fsync"})
	require.ErrorContains(t, err, `durability "fsync"`)
}
