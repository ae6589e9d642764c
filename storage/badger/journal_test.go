package badger

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crash stops s as a power cut would find it: Badger keeps only what it
// was given (its tables), the journal keeps every segment it has.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.closeCommitter()
	s.advice.close()
	s.journal.halt()
	require.NoError(t, s.journal.close(false))
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

// journalFiles lists the journal's segments and free segments.
func journalFiles(t *testing.T, dir string) (segments, free []string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, journalDir))
	require.NoError(t, err)
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Name(), freePrefix):
			free = append(free, e.Name())
		case strings.HasSuffix(e.Name(), segmentExt):
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
			assert.LessOrEqual(t, len(free), journalFreeKeep+1, "free segments are bounded")
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
	tmp := filepath.Join(dir, journalDir, "00000000000000ff.wal.tmp")
	require.NoError(t, os.WriteFile(tmp, make([]byte, 100), 0o600))
	s, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.NoFileExists(t, tmp)
}

// TestJournalRecyclesSegments checks, on the journal alone, that records
// of a free segment's earlier life are never replayed, that replay stops
// at a record whose sync did not finish, and that records come back in
// order with their writes.
func TestJournalRecyclesSegments(t *testing.T) {
	for _, key := range [][]byte{nil, bytes.Repeat([]byte{7}, 32)} {
		t.Run(fmt.Sprintf("encrypted=%v", key != nil), func(t *testing.T) {
			dir := t.TempDir()
			var syncs atomic.Int64
			syncStore := func() error { syncs.Add(1); return nil }
			noReplay := func(uint64, []journalWrite) error { return fmt.Errorf("an empty journal replays nothing") }
			j, err := openJournal(dir, key, 5*journalBlock, syncStore, noReplay)
			require.NoError(t, err)
			j.halt() // this test checkpoints by hand
			ts := uint64(0)
			write := func(k, v string) {
				ts++
				w := map[string]pendingWrite{k: {value: []byte(v)}}
				if v == "" {
					w[k] = pendingWrite{deleted: true}
				}
				require.NoError(t, j.append(ts, w))
			}
			// Four records per segment: four segments, three of them full,
			// written to a memtable whose log is there.
			mem := filepath.Join(dir, "00001.mem")
			require.NoError(t, os.WriteFile(mem, nil, 0o600))
			for i := range 16 {
				write(fmt.Sprintf("old%d", i), strings.Repeat("o", 100))
			}
			pending := func() int {
				j.mu.Lock()
				defer j.mu.Unlock()
				return len(j.full)
			}
			require.NoError(t, j.checkpoint())
			assert.Equal(t, 3, pending(), "the memtable's log is there: nothing retired")
			require.NoError(t, os.Remove(mem)) // Badger wrote it to a table
			require.NoError(t, j.checkpoint())
			assert.Zero(t, pending(), "retired once the memtable is in a table")
			assert.Zero(t, syncs.Load(), "without syncing the memtable logs")
			j.mu.Lock()
			free := len(j.free)
			j.mu.Unlock()
			assert.Equal(t, journalFreeKeep, free)
			// The next records go to a segment used before, which holds four
			// records of its earlier life.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "00002.mem"), nil, 0o600))
			write("new1", "a")
			write("new2", "")
			write("new3", "c")
			j.mu.Lock()
			assert.Equal(t, free-1, len(j.free), "a free segment was used again")
			j.mu.Unlock()
			// Past maxPending waiting segments, Badger is synced and they go.
			j.maxPending = 0
			require.NoError(t, j.checkpoint())
			assert.Zero(t, pending())
			assert.Equal(t, int64(1), syncs.Load(), "Badger synced")
			seg := j.active
			require.NoError(t, j.close(false))

			replay := func(dir string) []string {
				var got []string
				j, err := openJournal(dir, key, 5*journalBlock, syncStore, func(ts uint64, writes []journalWrite) error {
					for _, w := range writes {
						got = append(got, fmt.Sprintf("%d %s=%s deleted=%v", ts, w.key, w.value, w.deleted))
					}
					return nil
				})
				require.NoError(t, err)
				require.NoError(t, j.close(false))
				return got
			}
			want := []string{"17 new1=a deleted=false", "18 new2= deleted=true", "19 new3=c deleted=false"}

			// In a copy, the last record's sync did not finish: its second
			// half is what the segment held before.
			torn := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(torn, journalDir), 0o700))
			entries, err := os.ReadDir(filepath.Join(dir, journalDir))
			require.NoError(t, err)
			for _, e := range entries {
				data, err := os.ReadFile(filepath.Join(dir, journalDir, e.Name()))
				require.NoError(t, err)
				if e.Name() == filepath.Base(seg.path) {
					data[seg.off-journalBlock+recordHeader+2] ^= 0xff
					if key != nil {
						assert.NotContains(t, string(data), "new1", "nothing in clear")
					}
				}
				require.NoError(t, os.WriteFile(filepath.Join(torn, journalDir, e.Name()), data, 0o600))
			}

			assert.Equal(t, want, replay(dir), "the last segment's records, not those of its earlier life")
			assert.Equal(t, want[:len(want)-1], replay(torn), "up to the torn record")
		})
	}
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
		data, err := os.ReadFile(filepath.Join(dir, journalDir, name))
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

// TestJournalFailureRefusesWrites checks that after a failed journal write
// every write is refused and the store reports it, while reads go on.
func TestJournalFailureRefusesWrites(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer s.Close()
	put(t, s, "a", "1")
	require.NoError(t, s.journal.active.f.Close()) // its next write fails
	err = s.update(context.Background(), func(txn *tx) error { return txn.set([]byte("b"), []byte("2")) })
	require.ErrorContains(t, err, "journal failed")
	err = s.update(context.Background(), func(txn *tx) error { return txn.set([]byte("c"), []byte("3")) })
	require.ErrorContains(t, err, "journal failed", "and stays failed")
	assert.ErrorContains(t, s.Ping(context.Background()), "journal failed")
	hasValue(t, s, "a", "1")
	_, ok := value(t, s, "b")
	assert.False(t, ok)
}

// FuzzReplaySegment feeds replay arbitrary segment contents: it returns
// records or an error, never panics, and replays only whole records.
func FuzzReplaySegment(f *testing.F) {
	dir := f.TempDir()
	j, err := openJournal(dir, nil, 4*journalBlock, func() error { return nil }, func(uint64, []journalWrite) error { return nil })
	require.NoError(f, err)
	require.NoError(f, j.append(1, map[string]pendingWrite{"k": {value: []byte("v")}, "d": {deleted: true}}))
	seg := j.active
	require.NoError(f, j.close(false))
	data, err := os.ReadFile(seg.path)
	require.NoError(f, err)
	f.Add(data[:2*journalBlock])
	f.Add(data[:journalBlock+recordHeader+3])
	f.Fuzz(func(t *testing.T, data []byte) {
		var n int
		_ = replaySegment(data, seg.seq, nil, func(ts uint64, writes []journalWrite) error {
			n++
			for _, w := range writes {
				assert.False(t, w.deleted && len(w.value) > 0)
			}
			return nil
		})
		assert.LessOrEqual(t, n, (max(0, len(data)-journalBlock)+journalBlock-1)/journalBlock)
	})
}
