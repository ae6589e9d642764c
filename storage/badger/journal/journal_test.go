package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
			noReplay := func(uint64, []Write) error { return fmt.Errorf("an empty journal replays nothing") }
			j, err := Open(Options{StoreDir: dir, Key: key, SegmentSize: 5 * blockSize, SyncStore: syncStore}, noReplay)
			require.NoError(t, err)
			j.Halt() // this test checkpoints by hand
			ts := uint64(0)
			write := func(k, v string) {
				ts++
				w := map[string]Change{k: {Value: []byte(v)}}
				if v == "" {
					w[k] = Change{Deleted: true}
				}
				require.NoError(t, j.Append(ts, w))
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
			assert.Equal(t, freeKeep, free)
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
			require.NoError(t, j.Close(false))

			replay := func(dir string) []string {
				var got []string
				j, err := Open(Options{StoreDir: dir, Key: key, SegmentSize: 5 * blockSize, SyncStore: syncStore}, func(ts uint64, writes []Write) error {
					for _, w := range writes {
						got = append(got, fmt.Sprintf("%d %s=%s deleted=%v", ts, w.Key, w.Value, w.Deleted))
					}
					return nil
				})
				require.NoError(t, err)
				require.NoError(t, j.Close(false))
				return got
			}
			want := []string{"17 new1=a deleted=false", "18 new2= deleted=true", "19 new3=c deleted=false"}

			// In a copy, the last record's sync did not finish: its second
			// half is what the segment held before.
			torn := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(torn, Dir), 0o700))
			entries, err := os.ReadDir(filepath.Join(dir, Dir))
			require.NoError(t, err)
			for _, e := range entries {
				data, err := os.ReadFile(filepath.Join(dir, Dir, e.Name()))
				require.NoError(t, err)
				if e.Name() == filepath.Base(seg.path) {
					data[seg.off-blockSize+recordHeader+2] ^= 0xff
					if key != nil {
						assert.NotContains(t, string(data), "new1", "nothing in clear")
					}
				}
				require.NoError(t, os.WriteFile(filepath.Join(torn, Dir, e.Name()), data, 0o600))
			}

			assert.Equal(t, want, replay(dir), "the last segment's records, not those of its earlier life")
			assert.Equal(t, want[:len(want)-1], replay(torn), "up to the torn record")
		})
	}
}

// TestAppendAfterAFailedWrite checks that a failed write fails the
// journal: the batch and every later one are refused.
func TestAppendAfterAFailedWrite(t *testing.T) {
	j, err := Open(Options{StoreDir: t.TempDir(), SyncStore: func() error { return nil }}, func(uint64, []Write) error { return nil })
	require.NoError(t, err)
	defer j.Close(false)
	require.NoError(t, j.Append(1, map[string]Change{"a": {Value: []byte("1")}}))
	require.NoError(t, j.Failed())
	require.NoError(t, j.active.f.Close()) // its next write fails
	err = j.Append(2, map[string]Change{"b": {Value: []byte("2")}})
	require.ErrorContains(t, err, "journal failed")
	err = j.Append(3, map[string]Change{"c": {Value: []byte("3")}})
	require.ErrorContains(t, err, "journal failed", "and stays failed")
	assert.ErrorContains(t, j.Failed(), "journal failed")
}

// FuzzReplaySegment feeds replay arbitrary segment contents: it returns
// records or an error, never panics, and replays only whole records.
func FuzzReplaySegment(f *testing.F) {
	dir := f.TempDir()
	j, err := Open(Options{StoreDir: dir, SegmentSize: 4 * blockSize, SyncStore: func() error { return nil }}, func(uint64, []Write) error { return nil })
	require.NoError(f, err)
	require.NoError(f, j.Append(1, map[string]Change{"k": {Value: []byte("v")}, "d": {Deleted: true}}))
	seg := j.active
	require.NoError(f, j.Close(false))
	data, err := os.ReadFile(seg.path)
	require.NoError(f, err)
	f.Add(data[:2*blockSize])
	f.Add(data[:blockSize+recordHeader+3])
	f.Fuzz(func(t *testing.T, data []byte) {
		var n int
		_, _ = replaySegment(data, seg.seq, nil, func(err error) error { return err }, func(ts uint64, writes []Write) error {
			n++
			for _, w := range writes {
				assert.False(t, w.Deleted && len(w.Value) > 0)
			}
			return nil
		})
		assert.LessOrEqual(t, n, (max(0, len(data)-blockSize)+blockSize-1)/blockSize)
	})
}

// TestNilJournal: a store in memory has no journal, and its flusher calls
// the same methods on the nil one: they must neither panic nor invent an
// error, and a refused batch's error must reach its writers unchanged.
func TestNilJournal(t *testing.T) {
	var j *Journal
	refused := errors.New("badger refused the batch")
	require.NoError(t, j.Append(1, map[string]Change{"k": {Value: []byte("v")}}))
	require.Same(t, refused, j.Fail(refused))
	require.NoError(t, j.Failed())
}

// TestReplaySkipsRecordsThatWriteNothing opens a journal that an rxgate
// before this one left: a record without writes, then, from the process
// after a crash, a record at the same timestamp (Badger kept no version
// at the empty one's). Replay goes on past it, in order, and Append
// writes no record for a batch without writes.
func TestReplaySkipsRecordsThatWriteNothing(t *testing.T) {
	dir := t.TempDir()
	type rec struct {
		ts  uint64
		key string
	}
	var got []rec
	replay := func(ts uint64, writes []Write) error {
		for _, w := range writes {
			got = append(got, rec{ts, string(w.Key)})
		}
		return nil
	}
	j, err := Open(Options{StoreDir: dir, manualCheckpoint: true}, replay)
	require.NoError(t, err)
	require.NoError(t, j.Append(1, map[string]Change{"a": {Value: []byte("1")}}))
	require.NoError(t, j.append(2, nil)) // as the rxgate before did
	off := j.active.off
	require.NoError(t, j.Append(3, nil))
	assert.Equal(t, off, j.active.off, "no record for a batch that wrote nothing")
	require.NoError(t, j.Close(false))

	j, err = Open(Options{StoreDir: dir, manualCheckpoint: true}, replay)
	require.NoError(t, err)
	require.NoError(t, j.Append(2, map[string]Change{"b": {Value: []byte("2")}}))
	require.NoError(t, j.Close(false))

	got = nil
	j, err = Open(Options{StoreDir: dir, manualCheckpoint: true}, replay)
	require.NoError(t, err)
	require.NoError(t, j.Close(false))
	assert.Equal(t, []rec{{1, "a"}, {2, "b"}}, got)
}
