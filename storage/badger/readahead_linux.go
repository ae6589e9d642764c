//go:build linux

package badger

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Readahead on the memtable logs.
//
// Badger writes each memtable's log (NNNNN.mem, its own write-ahead log)
// through a shared mapping of a sparse file; the store syncs it (msync)
// when it syncs Badger's files (Store.syncBadger), and Badger synced it
// after each batch when it ran with SyncWrites, which is when this advice
// began. The first touch of a page of such a mapping faults it in with
// read-around: the kernel fills a readahead window around it (8 MiB on a
// disk with read_ahead_kb 8192), with folios that grow with each
// sequential window where the file system uses large folios (ext4 since
// Linux 6.16). A batch of a few kilobytes then dirties whole large folios,
// and writing them out writes every byte of them again: the disk wrote
// many times what the store wrote, the more as the memtable filled (see
// docs/performance-log.md; make bench-load measures the create path
// it slowed). Badger never advises its mappings; MADV_RANDOM turns
// read-around off for one, so a fault brings in a page and a sync writes
// what the batch changed.
//
// Badger gives no hook where it maps a new log, so walAdvice finds the
// logs' mappings in /proc/self/maps and advises each new one: right after
// Open, and after a commit lands, at most every walAdviceEvery. Badger maps
// a new log when its memtable fills, at the start of a batch, so the
// advice comes after that batch and up to walAdviceEvery of others: what
// read-around filled until then stays as it is (the first window, of small
// folios on recent kernels; at most one window beyond what was written by
// then), and from the advice on a fault brings in one page. The advice is
// only that: applied to a range that some other mapping took over in the
// meantime, it changes nothing but that mapping's readahead (and may split
// it in two).
//
// The value log (NNNNN.vlog) is left alone: only a value of 1 MiB or more
// goes there, which a record here reaches at most at the largest
// MaxRecordBytes, and its replay and garbage collection read it in order.

// walAdviceEvery bounds how often a busy store reads its mappings: each
// reading costs CPU, the more the more mappings (every table is one), and
// BenchmarkWALAdvise measures it.
const walAdviceEvery = 100 * time.Millisecond

// walAdvice advises the mappings of the memtable logs in one directory.
// Its goroutine is the Store's: started by Open, stopped by Close.
type walAdvice struct {
	dir string
	// maps is the file that lists the process's mappings (/proc/self/maps;
	// tests name another).
	maps string
	// madvise advises one range (adviseRandom; tests refuse).
	madvise func(start, length uintptr) syscall.Errno
	// log hears, once, that the advice cannot be given.
	log    *slog.Logger
	warned bool
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once // closes stop
	// advised holds the mappings already advised, as found in the last
	// reading of the maps.
	advised map[mapping]bool
}

// mapping is one line of /proc/self/maps, as far as walAdvice needs it.
type mapping struct {
	start, end uint64
	inode      uint64
	path       string
}

// startWALAdvice starts advising the memtable logs Badger maps in dir.
func (s *Store) startWALAdvice(dir string) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		// The maps name files by their resolved path: none would match.
		s.log.Warn("storage: the memtable logs' readahead stays on (the disk writes more per sync): the data directory's path cannot be resolved", "error", err)
		return
	}
	s.advice = newWALAdvice(abs, s.log)
	go s.advice.run()
}

// newWALAdvice returns the advice for the memtable logs in dir, a resolved
// path, not yet running.
func newWALAdvice(dir string, log *slog.Logger) *walAdvice {
	return &walAdvice{dir: dir, maps: "/proc/self/maps", madvise: adviseRandom, log: log,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), advised: map[mapping]bool{}}
}

// landed tells the advice that a commit landed: Badger may have mapped a
// new log for it.
func (a *walAdvice) landed() {
	if a == nil {
		return
	}
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// close stops the advice's goroutine and waits for it; closing again
// does nothing.
func (a *walAdvice) close() {
	if a == nil {
		return
	}
	a.once.Do(func() { close(a.stop) })
	<-a.done
}

func (a *walAdvice) run() {
	defer close(a.done)
	pause := time.NewTimer(walAdviceEvery)
	defer pause.Stop()
	for {
		a.advise()
		// Then wait for a commit, no sooner than walAdviceEvery.
		pause.Reset(walAdviceEvery)
		select {
		case <-a.stop:
			return
		case <-pause.C:
		}
		select {
		case <-a.stop:
			return
		case <-a.kick:
		}
	}
}

// advise advises the memtable logs' mappings not yet advised.
func (a *walAdvice) advise() {
	maps, err := os.ReadFile(a.maps)
	if err != nil {
		a.warn("their mappings cannot be read", err)
		return
	}
	seen := make(map[mapping]bool, len(a.advised))
	for line := range bytes.Lines(maps) {
		m, ok := parseMapping(line)
		if !ok || !a.isLog(m.path) {
			continue
		}
		if !a.advised[m] {
			switch errno := a.madvise(uintptr(m.start), uintptr(m.end-m.start)); {
			case errno == syscall.ENOMEM:
				continue // unmapped in the meantime: try again next time
			case errno != 0:
				// Refused (a sandbox's policy): the next reading would be too.
				a.warn("the kernel refuses the advice", errno)
			}
		}
		seen[m] = true
	}
	a.advised = seen
}

// adviseRandom turns read-around off for the mapped range.
func adviseRandom(start, length uintptr) syscall.Errno {
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, start, length, syscall.MADV_RANDOM)
	return errno
}

// warn says, once, that the advice cannot be given, and why.
func (a *walAdvice) warn(why string, err error) {
	if a.warned {
		return
	}
	a.warned = true
	a.log.Warn("storage: the memtable logs' readahead stays on (the disk writes more per sync): "+why, "error", err)
}

// isLog reports whether path is a memtable log of the advised directory.
func (a *walAdvice) isLog(path string) bool {
	return filepath.Ext(path) == ".mem" && filepath.Dir(path) == a.dir
}

// parseMapping parses a line of /proc/self/maps:
//
//	start-end perms offset dev inode [path]
//
// The path is the rest of the line after the inode's padding; a mapping of
// an anonymous memory or of a deleted file ("path (deleted)") has no path
// a log could have.
func parseMapping(line []byte) (mapping, bool) {
	line = bytes.TrimRight(line, "\n")
	var f [5][]byte
	rest := line
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			if i < len(f)-1 {
				return mapping{}, false
			}
			end = len(rest)
		}
		f[i], rest = rest[:end], rest[end:]
	}
	addr, perms, inode := f[0], f[1], f[4]
	lo, hi, ok := bytes.Cut(addr, []byte{'-'})
	if !ok || len(perms) != 4 {
		return mapping{}, false
	}
	var m mapping
	var err1, err2, err3 error
	m.start, err1 = strconv.ParseUint(string(lo), 16, 64)
	m.end, err2 = strconv.ParseUint(string(hi), 16, 64)
	m.inode, err3 = strconv.ParseUint(string(inode), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || m.end <= m.start {
		return mapping{}, false
	}
	m.path = string(bytes.TrimLeft(rest, " "))
	if m.inode == 0 || m.path == "" || bytes.HasSuffix(rest, []byte(" (deleted)")) {
		m.path = ""
	}
	return m, true
}
