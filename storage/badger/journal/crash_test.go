package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCrashFS checks the fault layer itself: what a crash keeps of
// writes, creates, renames and removes, synced or not.
func TestCrashFS(t *testing.T) {
	t.Parallel()
	const root = "/r"
	write := func(t *testing.T, c *crashFS, name string, off int64, data string, sync bool) {
		t.Helper()
		f, err := c.OpenFile(filepath.Join(root, name), os.O_CREATE|os.O_RDWR, 0o600)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte(data), off)
		require.NoError(t, err)
		if sync {
			require.NoError(t, f.Sync())
		}
		require.NoError(t, f.Close())
	}
	syncDir := func(t *testing.T, c *crashFS, dir string) {
		t.Helper()
		require.NoError(t, c.SyncDir(filepath.Join(root, dir)))
	}
	tests := []struct {
		name string
		do   func(t *testing.T, c *crashFS)
		mode crashMode
		want map[string]string // file → content after the crash; absent files are not there
	}{
		{"an unsynced write is lost", func(t *testing.T, c *crashFS) {
			write(t, c, "a", 0, "abc", false)
			syncDir(t, c, "")
		}, crashMode{}, map[string]string{"a": ""}},
		{"a synced write survives", func(t *testing.T, c *crashFS) {
			write(t, c, "a", 0, "abc", true)
			syncDir(t, c, "")
		}, crashMode{}, map[string]string{"a": "abc"}},
		{"the last unsynced write is torn", func(t *testing.T, c *crashFS) {
			write(t, c, "a", 0, "hello", true)
			syncDir(t, c, "")
			write(t, c, "a", 5, "WORLD", false)
		}, crashMode{tornKeep: 2}, map[string]string{"a": "helloWO"}},
		{"a create is lost without a directory sync", func(t *testing.T, c *crashFS) {
			write(t, c, "a", 0, "abc", true)
		}, crashMode{}, map[string]string{}},
		{"a rename is lost without a directory sync", func(t *testing.T, c *crashFS) {
			write(t, c, "a", 0, "abc", true)
			syncDir(t, c, "")
			require.NoError(t, c.Rename(root+"/a", root+"/b"))
		}, crashMode{}, map[string]string{"a": "abc"}},
		{"a rename is kept with a directory sync", func(t *testing.T, c *crashFS) {
			write(t, c, "a", 0, "abc", true)
			syncDir(t, c, "")
			require.NoError(t, c.Rename(root+"/a", root+"/b"))
			syncDir(t, c, "")
		}, crashMode{}, map[string]string{"b": "abc"}},
		{"a remove is lost without a directory sync", func(t *testing.T, c *crashFS) {
			write(t, c, "a", 0, "abc", true)
			syncDir(t, c, "")
			require.NoError(t, c.Remove(root+"/a"))
		}, crashMode{}, map[string]string{"a": "abc"}},
		{"a directory is lost without its parent's sync", func(t *testing.T, c *crashFS) {
			require.NoError(t, c.MkdirAll(root+"/d", 0o700))
			write(t, c, "d/a", 0, "abc", true)
			syncDir(t, c, "d")
		}, crashMode{}, map[string]string{}},
		{"a directory is kept with its parent's sync", func(t *testing.T, c *crashFS) {
			require.NoError(t, c.MkdirAll(root+"/d", 0o700))
			write(t, c, "d/a", 0, "abc", true)
			syncDir(t, c, "d")
			syncDir(t, c, "")
		}, crashMode{}, map[string]string{"d/a": "abc"}},
		{"a failed sync syncs nothing", func(t *testing.T, c *crashFS) {
			write(t, c, "a", 0, "abc", true)
			syncDir(t, c, "")
			c.setFailSync(true)
			f, err := c.OpenFile(root+"/a", os.O_RDWR, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte("X"), 0)
			require.NoError(t, err)
			require.Error(t, f.Sync())
		}, crashMode{}, map[string]string{"a": "abc"}},
		{"corruption damages synced bytes", func(t *testing.T, c *crashFS) {
			write(t, c, "a", 0, "abc", true)
			syncDir(t, c, "")
			c.corrupt(root+"/a", 1, 1)
		}, crashMode{}, map[string]string{"a": string([]byte{'a', 'b' ^ 0xa5, 'c'})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCrashFS(root)
			tt.do(t, c)
			c.crash(tt.mode)
			got := map[string]string{}
			for path, n := range c.names {
				if !n.dir {
					data, err := c.ReadFile(path)
					require.NoError(t, err)
					got[strings.TrimPrefix(path, root+"/")] = string(data)
				}
			}
			assert.Equal(t, tt.want, got)
		})
	}

	t.Run("files opened before a crash are dead", func(t *testing.T) {
		c := newCrashFS(root)
		f, err := c.OpenFile(root+"/a", os.O_CREATE|os.O_RDWR, 0o600)
		require.NoError(t, err)
		c.crash(crashMode{})
		_, err = f.WriteAt([]byte("x"), 0)
		assert.ErrorIs(t, err, errDead)
	})
}

// crashJournal is a journal on a crashFS, with segments of four
// one-block records.
type crashJournal struct {
	fs       *crashFS
	storeDir string
}

func newCrashJournal(t testing.TB) *crashJournal {
	t.Helper()
	c := newCrashFS("/data")
	// Badger made its directory, durably, and has a memtable: the
	// checkpointer retires no segment.
	storeDir := "/data/store"
	require.NoError(t, c.MkdirAll(storeDir, 0o700))
	require.NoError(t, c.SyncDir("/data"))
	f, err := c.OpenFile(filepath.Join(storeDir, "00001.mem"), os.O_CREATE|os.O_RDWR, 0o600)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, c.SyncDir(storeDir))
	return &crashJournal{fs: c, storeDir: storeDir}
}

// open opens the journal and returns the commit timestamps it replayed;
// its checkpointer is halted, so that full segments stay.
func (cj *crashJournal) open() (*Journal, []uint64, error) {
	return cj.openWith(Options{})
}

// openWith is open with opts' SkipCorrupt, Dropped and manualCheckpoint.
func (cj *crashJournal) openWith(opts Options) (*Journal, []uint64, error) {
	var got []uint64
	j, err := Open(Options{StoreDir: cj.storeDir, SegmentSize: 5 * blockSize, SyncStore: func() error { return nil }, FS: cj.fs,
		SkipCorrupt: opts.SkipCorrupt, Dropped: opts.Dropped, manualCheckpoint: opts.manualCheckpoint},
		func(ts uint64, writes []Write) error {
			if len(writes) != 1 || string(writes[0].Key) != fmt.Sprint(ts) {
				return fmt.Errorf("record %d holds %v", ts, writes)
			}
			got = append(got, ts)
			return nil
		})
	if err == nil {
		j.Halt()
	}
	return j, got, err
}

// appendTs appends the records of the timestamps, each key its
// timestamp, with a value of size bytes (not zeros: a torn write must
// differ from the zeros it overwrites).
func appendTs(t testing.TB, j *Journal, size int, ts ...uint64) {
	t.Helper()
	for _, ts := range ts {
		require.NoError(t, j.Append(ts, map[string]Change{fmt.Sprint(ts): {Value: bytes.Repeat([]byte{'v'}, size)}}))
	}
}

// segments lists the journal's segment files (not the free ones), oldest
// first.
func (cj *crashJournal) segments(t testing.TB) []string {
	t.Helper()
	entries, err := cj.fs.ReadDir(filepath.Join(cj.storeDir, Dir))
	require.NoError(t, err)
	var segs []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), segmentExt) && !strings.HasPrefix(e.Name(), freePrefix) {
			segs = append(segs, filepath.Join(cj.storeDir, Dir, e.Name()))
		}
	}
	slices.Sort(segs)
	return segs
}

// TestJournalDirectoryIsDurable checks defect D of issue 26: an
// acknowledged record survives a power cut right after the journal's
// directory was made, and MkdirAll (the store's own directory) makes
// every new level durable.
func TestJournalDirectoryIsDurable(t *testing.T) {
	t.Parallel()
	cj := newCrashJournal(t)
	j, _, err := cj.open()
	require.NoError(t, err)
	appendTs(t, j, 10, 1)
	cj.fs.crash(crashMode{})
	_, got, err := cj.open()
	require.NoError(t, err)
	assert.Equal(t, []uint64{1}, got, "the acknowledged record survives")

	c := newCrashFS("/data")
	require.NoError(t, mkdirDurable(c, "/data/a/b/c"))
	c.crash(crashMode{})
	fi, err := c.Stat("/data/a/b/c")
	require.NoError(t, err, "every new level survives")
	assert.True(t, fi.IsDir())
	require.NoError(t, mkdirDurable(c, "/data/a/b/c"), "and is left as it is")
}

// TestReplayAfterATornWrite checks that the write a power cut tore (never
// acknowledged: its sync did not finish) ends the journal in silence,
// whatever part of it reached the disk, and goes on doing so once its
// segment is no longer the last.
func TestReplayAfterATornWrite(t *testing.T) {
	t.Parallel()
	for _, keep := range []int{0, 1, recordHeader, blockSize, blockSize + 20} {
		t.Run(fmt.Sprintf("keep=%d", keep), func(t *testing.T) {
			cj := newCrashJournal(t)
			j, _, err := cj.open()
			require.NoError(t, err)
			appendTs(t, j, 10, 1, 2, 3, 4, 5) // a full segment, one record in the next
			cj.fs.setFailSync(true)
			// Two blocks: a torn write may keep its header and lose the rest.
			require.Error(t, j.Append(6, map[string]Change{"6": {Value: bytes.Repeat([]byte{'v'}, blockSize)}}))
			cj.fs.setFailSync(false)
			cj.fs.crash(crashMode{tornKeep: keep})

			j, got, err := cj.open()
			require.NoError(t, err)
			assert.Equal(t, []uint64{1, 2, 3, 4, 5}, got)
			appendTs(t, j, 10, 7)
			cj.fs.crash(crashMode{})
			_, got, err = cj.open()
			require.NoError(t, err, "the torn segment is no longer the last")
			assert.Equal(t, []uint64{1, 2, 3, 4, 5, 7}, got)
		})
	}
}

// TestReplayRefusesCorruption checks defect C of issue 26: a damaged
// record that is not the torn end of the last write fails Open, with the
// segment and the offset, instead of dropping acknowledged records.
func TestReplayRefusesCorruption(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		segment int   // which segment, oldest first
		off     int64 // where to damage it
		n       int   // how many bytes
		want    string
		kept    []uint64 // what an Open with SkipCorrupt replays
	}{
		{"a record in the middle of the last segment", 1, 2*blockSize + recordHeader + 3, 1,
			"corrupt at offset 8192 (a whole record follows at 12288)", []uint64{1, 2, 3, 4, 5, 7}},
		{"the length of a record in the middle", 1, 2*blockSize + recLen, 1,
			"corrupt at offset 8192 (a whole record follows at 12288)", []uint64{1, 2, 3, 4, 5, 7}},
		{"the segment number of a record in the middle", 1, 2*blockSize + recSeq, 1,
			"corrupt at offset 8192 (a whole record follows at 12288)", []uint64{1, 2, 3, 4, 5, 7}},
		{"the last record of a segment before the last", 0, 4*blockSize + recordHeader + 3, 1,
			"corrupt at offset 16384 (not the last segment", []uint64{1, 2, 3, 5, 6, 7}},
		{"the first record of a segment before the last", 0, blockSize + recordHeader, 1,
			"corrupt at offset 4096 (a whole record follows at 8192)", []uint64{2, 3, 4, 5, 6, 7}},
		{"the header of a segment with records", 1, 0, 1,
			"corrupt at offset 0 (the segment's header is damaged, and a whole record is at 4096)", []uint64{1, 2, 3, 4}},
		{"the header of a segment before the last", 0, 20, 1,
			"corrupt at offset 0", []uint64{5, 6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := newCrashJournal(t)
			j, _, err := cj.open()
			require.NoError(t, err)
			appendTs(t, j, 10, 1, 2, 3, 4, 5, 6, 7) // four records in one segment, three in the next
			segs := cj.segments(t)
			require.Len(t, segs, 2)
			cj.fs.corrupt(segs[tt.segment], tt.off, tt.n)
			cj.fs.crash(crashMode{})

			_, _, err = cj.open()
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrCorrupt), "%v", err)
			what := "segment " + filepath.Join(Dir, filepath.Base(segs[tt.segment])) + ": " + tt.want
			assert.Contains(t, err.Error(), what)
			assert.Contains(t, err.Error(), "refusing to open")
			assert.NotContains(t, err.Error(), "\n", "one line")

			// Told to, Open goes on without the damaged records, and says
			// what it dropped.
			var dropped []error
			_, got, err := cj.openWith(Options{SkipCorrupt: true, Dropped: func(err error) { dropped = append(dropped, err) }})
			require.NoError(t, err)
			assert.Equal(t, tt.kept, got)
			require.Len(t, dropped, 1)
			assert.ErrorIs(t, dropped[0], ErrCorrupt)
			assert.Contains(t, dropped[0].Error(), what)
		})
	}

	t.Run("a damaged header of the last segment, with no record, is removed", func(t *testing.T) {
		cj := newCrashJournal(t)
		j, _, err := cj.open()
		require.NoError(t, err)
		appendTs(t, j, 10, 1, 2, 3, 4)
		segs := cj.segments(t)
		// The next segment was made ready, its header never synced.
		require.NoError(t, j.activate(0))
		last := cj.segments(t)[1]
		cj.fs.corrupt(last, 20, 1)
		cj.fs.crash(crashMode{})
		_, got, err := cj.open()
		require.NoError(t, err)
		assert.Equal(t, []uint64{1, 2, 3, 4}, got)
		_, err = cj.fs.Stat(last)
		assert.True(t, errors.Is(err, fs.ErrNotExist), "removed")
		assert.Equal(t, segs[0], cj.segments(t)[0])
	})
}

// TestJournalSurvivesACrashAnywhere runs a workload on the journal
// (appends, segments filled, retired and used again) and cuts the power
// after each of its file operations in turn, in each crash mode. Every
// time, the journal opens, with every acknowledged record that Badger
// does not hold, in order; and again, the same, after a second cut right
// after that open.
func TestJournalSurvivesACrashAnywhere(t *testing.T) {
	t.Parallel()
	const records = 24
	// run is the workload, the machine going down after its downAfter-th
	// operation (never when 0). It returns the records acknowledged, those
	// Badger holds durably, and how many operations it made.
	run := func(t *testing.T, cj *crashJournal, downAfter int) (acked, inBadger map[uint64]bool, ops int) {
		acked, inBadger = map[uint64]bool{}, map[uint64]bool{}
		cj.fs.mu.Lock()
		cj.fs.ops, cj.fs.downAfter = 0, downAfter
		cj.fs.mu.Unlock()
		defer func() {
			cj.fs.mu.Lock()
			ops = cj.fs.ops
			cj.fs.mu.Unlock()
		}()
		j, _, err := cj.openWith(Options{manualCheckpoint: true})
		if err != nil {
			require.ErrorIs(t, err, errDown)
			return acked, inBadger, 0
		}
		segOf := map[uint64]uint64{}
		mem := filepath.Join(cj.storeDir, "00001.mem")
		for ts := uint64(1); ts <= records; ts++ {
			size := 10
			if ts%3 == 0 {
				size = blockSize // two blocks: a torn write may keep the first
			}
			if j.Append(ts, map[string]Change{fmt.Sprint(ts): {Value: bytes.Repeat([]byte{'v'}, size)}}) == nil {
				acked[ts], segOf[ts] = true, j.active.seq
			}
			if ts%5 != 0 {
				continue
			}
			// Badger writes its memtable to a table, synced, and removes
			// its log: it holds every record of the full segments.
			if cj.fs.Remove(mem) != nil {
				continue
			}
			for ts, seq := range segOf {
				if seq != j.active.seq {
					inBadger[ts] = true
				}
			}
			if err := j.checkpoint(); err != nil {
				_ = j.Fail(err)
			}
			if f, err := cj.fs.OpenFile(mem, os.O_CREATE|os.O_RDWR, 0o600); err == nil {
				_ = f.Close()
				_ = cj.fs.SyncDir(cj.storeDir)
			}
		}
		return acked, inBadger, 0
	}

	_, _, total := run(t, newCrashJournal(t), 0)
	require.Greater(t, total, 50, "the workload does much")
	for _, mode := range []crashMode{{}, {tornKeep: 1}, {tornKeep: recordHeader + 7}, {tornKeep: blockSize + 50}} {
		t.Run(fmt.Sprintf("keep=%d", mode.tornKeep), func(t *testing.T) {
			for downAfter := 1; downAfter <= total+1; downAfter++ {
				cj := newCrashJournal(t)
				acked, inBadger, _ := run(t, cj, downAfter)
				cj.fs.crash(mode)

				_, got, err := cj.openWith(Options{manualCheckpoint: true})
				require.NoError(t, err, "down after %d operations", downAfter)
				for _, ts := range got {
					require.LessOrEqual(t, ts, uint64(records), "down after %d operations: replayed what was never written", downAfter)
				}
				for ts := range acked {
					require.True(t, inBadger[ts] || slices.Contains(got, ts), "down after %d operations: acknowledged record %d lost (replayed %v)", downAfter, ts, got)
				}
				cj.fs.crash(crashMode{})
				_, again, err := cj.openWith(Options{manualCheckpoint: true})
				require.NoError(t, err, "down after %d operations, then a cut after the open", downAfter)
				require.Equal(t, got, again, "down after %d operations, then a cut after the open", downAfter)
			}
		})
	}
}

// TestReplayIsDurable checks defect A of issue 26 ("seen, then gone") for
// the journal's part: a record whose Append failed before its sync (never
// acknowledged) is still in the page cache after a process crash, and the
// next Open replays it, so the store serves it. A power cut after that
// Open must not take it back, nor the records acknowledged since.
func TestReplayIsDurable(t *testing.T) {
	t.Parallel()
	cj := newCrashJournal(t)
	j, _, err := cj.open()
	require.NoError(t, err)
	appendTs(t, j, 10, 1, 2)
	cj.fs.setFailSync(true)
	require.Error(t, j.Append(3, map[string]Change{"3": {Value: []byte("unsynced")}}))
	cj.fs.setFailSync(false)

	// A process crash: the page cache keeps the unsynced write.
	j, got, err := cj.openWith(Options{})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3}, got, "the restarted store serves record 3")
	appendTs(t, j, 10, 4)

	// A power cut soon after.
	cj.fs.crash(crashMode{})
	_, got, err = cj.open()
	require.NoError(t, err)
	assert.Equal(t, []uint64{1, 2, 3, 4}, got, "what the restarted store served survives the power cut")
}
