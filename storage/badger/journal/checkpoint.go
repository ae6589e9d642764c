package journal

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// signal wakes the checkpointer, unless a wake is already pending.
func (j *Journal) signal() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// run is the checkpointer: it retires full segments until Halt, when one
// fills and every pollEvery while some wait.
func (j *Journal) run() {
	defer close(j.done)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-j.wake:
		case <-tick.C:
			j.mu.Lock()
			waiting := len(j.full) > 0
			j.mu.Unlock()
			if !waiting {
				continue
			}
		}
		if err := j.checkpoint(); err != nil {
			_ = j.Fail(err)
		}
	}
}

// checkpoint retires the full segments whose records Badger holds durably,
// oldest first, and keeps a free segment ready. A segment is full only
// once the flusher moves past it, after Badger was given its last batch,
// so its records are all in the memtables whose logs exist when the
// checkpointer first looks at it, or in tables. Badger writes a memtable
// to a synced table (and records it in its synced manifest) before it
// removes the memtable's log: once those logs are gone, an fsync of the
// value logs (a value of 1 MiB is there, not in the table) and of the
// directory makes the records durable without writing the memtable logs
// out. Past maxPending waiting segments (a quiet store fills a memtable
// slowly), Badger's files are synced instead (syncStore) and every full
// segment goes.
func (j *Journal) checkpoint() error {
	j.mu.Lock()
	full := slices.Clone(j.full)
	j.mu.Unlock()
	done := 0
	for _, seg := range full {
		if seg.mems == nil {
			mems, err := memLogs(j.fs, j.storeDir)
			if err != nil {
				return err
			}
			seg.mems = mems
		}
	}
	for _, seg := range full {
		if slices.ContainsFunc(seg.mems, func(name string) bool {
			_, err := j.fs.Stat(filepath.Join(j.storeDir, name))
			return !errors.Is(err, os.ErrNotExist)
		}) {
			break
		}
		done++
	}
	switch {
	case len(full) > j.maxPending:
		if err := j.syncStore(); err != nil {
			return err
		}
		done = len(full)
	case done > 0:
		if err := syncFiles(j.fs, j.storeDir, ".vlog"); err != nil {
			return err
		}
	}
	for _, seg := range full[:done] {
		if err := j.free1(seg); err != nil {
			return err
		}
	}
	return j.spare()
}

// spare makes a free segment when there is none, so that the flusher's
// next segment is ready.
func (j *Journal) spare() error {
	j.mu.Lock()
	if len(j.free) > 0 {
		j.mu.Unlock()
		return nil
	}
	seq := j.nextSeq // its name's alone
	j.nextSeq++
	j.mu.Unlock()
	// Made under a free name: activate takes it as it would any.
	path := filepath.Join(j.dir, freePrefix+filepath.Base(j.segmentPath(seq)))
	if err := j.makeSegmentFile(path, j.segSize); err != nil {
		return err
	}
	if err := j.fs.SyncDir(j.dir); err != nil {
		return err
	}
	j.mu.Lock()
	j.free = append(j.free, path)
	j.mu.Unlock()
	return nil
}

// memLogs lists the memtable logs in Badger's directory.
func memLogs(fsys FS, dir string) ([]string, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	mems := []string{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".mem") {
			mems = append(mems, e.Name())
		}
	}
	return mems, nil
}

// free1 renames a retired segment to a free one, durably, and drops it
// from full; beyond freeKeep free segments it is removed instead.
func (j *Journal) free1(seg *segment) error {
	j.mu.Lock()
	keep := len(j.free) < freeKeep
	j.mu.Unlock()
	freePath := filepath.Join(j.dir, freePrefix+filepath.Base(seg.path))
	var err error
	if keep {
		err = j.fs.Rename(seg.path, freePath)
	} else {
		err = j.fs.Remove(seg.path)
	}
	if err == nil {
		err = j.fs.SyncDir(j.dir)
	}
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.full = slices.DeleteFunc(j.full, func(s *segment) bool { return s == seg })
	if keep {
		j.free = append(j.free, freePath)
	}
	j.mu.Unlock()
	return nil
}
