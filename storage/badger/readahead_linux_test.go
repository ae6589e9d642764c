//go:build linux

package badger

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMapping(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want mapping
		ok   bool
	}{
		{"7f1c2a000000-7f1c2e000000 rw-s 00000000 fc:01 1311 /data/00001.mem\n",
			mapping{start: 0x7f1c2a000000, end: 0x7f1c2e000000, inode: 1311, path: "/data/00001.mem"}, true},
		{"7f1c2a000000-7f1c2e000000 rw-s 00000000 fc:01 1311                       /data dir/00001.mem",
			mapping{start: 0x7f1c2a000000, end: 0x7f1c2e000000, inode: 1311, path: "/data dir/00001.mem"}, true},
		{"7f1c2a000000-7f1c2e000000 rw-s 00000000 fc:01 1311 /data/00001.mem (deleted)\n",
			mapping{start: 0x7f1c2a000000, end: 0x7f1c2e000000, inode: 1311}, true},
		{"c000000000-c004000000 rw-p 00000000 00:00 0 \n", mapping{start: 0xc000000000, end: 0xc004000000}, true},
		{"7ffd1e9f0000-7ffd1ea11000 rw-p 00000000 00:00 0                          [stack]\n",
			mapping{start: 0x7ffd1e9f0000, end: 0x7ffd1ea11000}, true},
		{"Size:                  4 kB\n", mapping{}, false},
		{"VmFlags: rd wr sh mr mw me ms rr sd\n", mapping{}, false},
		{"2000-1000 rw-s 00000000 fc:01 1311 /data/00001.mem\n", mapping{}, false},
		{"x-y rw-s 00000000 fc:01 1311 /data/00001.mem\n", mapping{}, false},
		{"1000-2000 rw-s 00000000 fc:01\n", mapping{}, false},
		{"", mapping{}, false},
	}
	for _, tt := range tests {
		got, ok := parseMapping([]byte(tt.line))
		assert.Equal(t, tt.ok, ok, "%q", tt.line)
		assert.Equal(t, tt.want, got, "%q", tt.line)
	}
}

func FuzzParseMapping(f *testing.F) {
	f.Add([]byte("7f1c2a000000-7f1c2e000000 rw-s 00000000 fc:01 1311 /data/00001.mem\n"))
	f.Add([]byte("1-2 rw-s 0 0:0 1  x (deleted)"))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, ok := parseMapping(line)
		if ok && m.end <= m.start {
			t.Fatalf("%q: a mapping ending at %x before its start %x", line, m.end, m.start)
		}
		if !ok && m != (mapping{}) {
			t.Fatalf("%q: a refused line gave %+v", line, m)
		}
	})
}

// memMappings reads /proc/self/smaps and returns, for each mapping of a
// memtable log in dir, whether readahead is off for it (VmFlags rr).
func memMappings(t *testing.T, dir string) map[string]bool {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	advice := newWALAdvice(dir, nil) // for isLog only
	logs := map[string]bool{}
	var current string
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		if m, ok := parseMapping([]byte(line)); ok {
			current = ""
			if advice.isLog(m.path) {
				current = fmt.Sprintf("%s@%x", filepath.Base(m.path), m.start)
				logs[current] = false
			}
			continue
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && current != "" {
			logs[current] = strings.Contains(flags+" ", " rr ")
		}
	}
	require.NoError(t, sc.Err())
	return logs
}

// TestWALAdvice checks that readahead is off on the mapping of every
// memtable log, the one Open maps and those Badger maps when a memtable
// fills.
func TestWALAdvice(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	s, err := Open(Options{Dir: dir, memTableSize: 8 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })

	advised := func() (logs map[string]bool, all bool) {
		logs = memMappings(t, dir)
		all = len(logs) > 0
		for _, rr := range logs {
			all = all && rr
		}
		return logs, all
	}
	waitAdvised := func() map[string]bool {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			logs, all := advised()
			if all {
				return logs
			}
			if time.Now().After(deadline) {
				require.FailNow(t, "readahead is on for a memtable log", "%v", logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	first := waitAdvised()
	logFiles := func() map[string]bool {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		names := map[string]bool{}
		for _, e := range entries {
			if filepath.Ext(e.Name()) == ".mem" {
				names[e.Name()] = true
			}
		}
		return names
	}
	atOpen := logFiles()
	require.NotEmpty(t, first)

	// Fill memtables until Badger maps a log Open did not.
	value := bytes.Repeat([]byte{'v'}, 64<<10)
	for i := 0; ; i++ {
		require.Less(t, i, 10_000, "no new memtable after %d writes", i)
		require.NoError(t, s.update(t.Context(), func(txn *tx) error {
			return txn.set(fmt.Appendf(nil, "test/%08d", i), value)
		}))
		fresh := false
		for name := range logFiles() {
			fresh = fresh || !atOpen[name]
		}
		if fresh {
			break
		}
	}
	logs := waitAdvised()
	fresh := false
	for name := range logs {
		fresh = fresh || !first[name]
	}
	require.True(t, fresh, "no new log's mapping among %v", logs)
}

// BenchmarkWALAdvise is one reading of the maps, a small store's (every
// table of a store is a mapping too, so a large store's costs more): at
// most walAdviceEvery apart under load, none when idle.
func BenchmarkWALAdvise(b *testing.B) {
	dir, err := filepath.EvalSymlinks(b.TempDir())
	require.NoError(b, err)
	s, err := Open(Options{Dir: dir})
	require.NoError(b, err)
	b.Cleanup(func() { _ = s.Close() })
	// An advice of its own: the store's runs beside it.
	a := newWALAdvice(dir, slog.New(slog.DiscardHandler))
	for b.Loop() {
		a.advise()
	}
	require.NotEmpty(b, a.advised, "the benchmark found no log to advise")
}

// TestWALAdviceWithoutMaps: where the maps cannot be read, the store says
// so once, and goes on.
func TestWALAdviceWithoutMaps(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	a := newWALAdvice(t.TempDir(), slog.New(slog.NewTextHandler(&out, nil)))
	a.maps = filepath.Join(t.TempDir(), "no-maps")
	a.advise()
	a.advise()
	assert.Equal(t, 1, strings.Count(out.String(), "readahead stays on"), out.String())
	assert.Contains(t, out.String(), "level=WARN")
}

// TestWALAdviceRefused: where the kernel refuses the advice (a sandbox's
// policy), the store says so once and does not ask again for that mapping;
// a mapping gone in the meantime is asked for again, silently.
func TestWALAdviceRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	maps := filepath.Join(t.TempDir(), "maps")
	require.NoError(t, os.WriteFile(maps, []byte(
		"7f0000000000-7f0008000000 rw-s 00000000 fc:01 11 "+dir+"/00001.mem\n"+
			"7f0010000000-7f0018000000 rw-s 00000000 fc:01 12 "+dir+"/00002.mem\n"+
			"7f0020000000-7f0028000000 rw-s 00000000 fc:01 13 "+dir+"/000001.vlog\n"), 0o600))
	var out bytes.Buffer
	asked := map[uintptr]int{}
	a := newWALAdvice(dir, slog.New(slog.NewTextHandler(&out, nil)))
	a.maps = maps
	a.madvise = func(start, _ uintptr) syscall.Errno {
		asked[start]++
		if start == 0x7f0010000000 {
			return syscall.ENOMEM
		}
		return syscall.EPERM
	}
	a.advise()
	a.advise()
	assert.Equal(t, map[uintptr]int{0x7f0000000000: 1, 0x7f0010000000: 2}, asked, "the refused one once, the gone one each time, never the value log")
	assert.Equal(t, 1, strings.Count(out.String(), "the kernel refuses the advice"), out.String())
}
