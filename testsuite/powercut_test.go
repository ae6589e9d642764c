//go:build powercut && linux

package testsuite_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite"
)

// The power-cut test: `make powercut` (issue 26). A process kill cannot
// test durability, since the page cache survives it; this test cuts the
// power of the file system under the real binary instead. The data
// directory is on a file system (ext4 or XFS) in an image on tmpfs behind
// a loop device; a cut is the file-system shutdown ioctl without a log
// flush (EXT4_IOC_SHUTDOWN and XFS_IOC_GOINGDOWN, one request number, as
// xfstests' godown does): every write not yet synced is lost, as at a
// power cut, and the remount replays the file system's own journal.
//
// Two modes, POWERCUTS cycles each (default 200), on POWERCUT_FS (ext4,
// the default, or xfs):
//   - cut: under the soak's load (soak_test.go), cut at a random moment,
//     kill -9, remount, restart; every acknowledged create and update must
//     be there, and every webhook delivered before the cut must name a
//     prescription that is.
//   - crash-then-cut (defect A): kill -9 under load, restart, read what
//     the restarted server lists (also creates never acknowledged), cut
//     within 0-2 s under load, remount, restart: all of it must be there.
//
// It needs Linux, root, loop devices, losetup, mount and mkfs.ext4 (or
// mkfs.xfs, from xfsprogs); without them it skips with one line. It
// removes every mount, loop device and image it made, also on SIGINT or
// SIGTERM.

const (
	powercutImageSize = 2 << 30 // sparse, on tmpfs: only what is written uses memory
	powercutPatients  = 2       // new patients each cycle, for its creates
	// powercutStartupCuts is the share of restarts cut again 0-200 ms
	// after exec, while the store opens.
	powercutStartupCuts = 0.1
	// powercutIoctl is EXT4_IOC_SHUTDOWN, which is XFS_IOC_GOINGDOWN:
	// _IOR('X', 125, __u32).
	powercutIoctl = 0x8004587d
	// powercutNoLogFlush is EXT4_GOING_FLAGS_NOLOGFLUSH, which is
	// XFS_FSOP_GOING_FLAGS_NOLOGFLUSH: the file system stops without
	// writing back its journal, as the power would.
	powercutNoLogFlush = 2
)

func TestPowercut(t *testing.T) {
	cuts := soakEnv(t, "POWERCUTS", 200)
	fsType := os.Getenv("POWERCUT_FS")
	if fsType == "" {
		fsType = "ext4"
	}
	require.Contains(t, []string{"ext4", "xfs"}, fsType, "POWERCUT_FS")
	if why := powercutCannot(fsType); why != "" {
		t.Skip("powercut: " + why)
	}
	bin := rxgateBinary(t)
	for _, mode := range []string{"cut", "crash-then-cut"} {
		t.Run(mode, func(t *testing.T) {
			rig := newPowercutRig(t, bin, fsType)
			rig.run(t, mode == "crash-then-cut", cuts)
		})
	}
}

// powercutCannot says why this machine cannot run the test, or "".
func powercutCannot(fsType string) string {
	if os.Geteuid() != 0 {
		return "needs root (loop devices and mounts); skipped"
	}
	for _, tool := range []string{"losetup", "mount", "umount", "truncate", "mkfs." + fsType} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is missing (mkfs.xfs is in xfsprogs); skipped"
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "no loop devices (/dev/loop-control); skipped"
	}
	var st unix.Statfs_t
	if err := unix.Statfs(powercutImageDir(), &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return powercutImageDir() + " is not a tmpfs (POWERCUT_IMAGE_DIR); skipped"
	}
	return ""
}

// powercutImageDir holds the image: a tmpfs, so that only the test's
// own cut, never the machine's disk, decides what was written.
func powercutImageDir() string {
	if d := os.Getenv("POWERCUT_IMAGE_DIR"); d != "" {
		return d
	}
	return "/dev/shm"
}

// powercutRig is one file system in an image behind a loop device, and
// the server on it. Its teardown runs once, from t.Cleanup or from the
// signal handler.
type powercutRig struct {
	sk                     *soaker
	fsType                 string
	image, mnt, loop       string
	mu                     sync.Mutex // guards proc, loop, mounted and done
	proc                   *soakProc
	mounted, done          bool
	stopSignals            func()
	cutAt, restartAt       time.Time
	restarts               []time.Duration
	cycles, failedOpens    int
	startupCuts            int
	lost, gone, lostUpdate int
}

func newPowercutRig(t *testing.T, bin, fsType string) *powercutRig {
	r := &powercutRig{sk: &soaker{t: t, bin: bin}, fsType: fsType}
	r.image = filepath.Join(powercutImageDir(), fmt.Sprintf("rxgate-powercut-%d-%s.img", os.Getpid(), storage.NewSecret()[:8]))
	r.mnt = t.TempDir()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	stop := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			// A timeout signals the whole group: go test is gone too, and
			// a write to its pipe would kill this process (SIGPIPE) before
			// it cleans up.
			signal.Ignore(syscall.SIGPIPE)
			fmt.Fprintf(os.Stderr, "powercut: %v: removing the mount, loop device and image\n", s)
			r.teardown()
			os.Exit(1)
		case <-stop:
		}
	}()
	r.stopSignals = func() { signal.Stop(sig); close(stop) }
	t.Cleanup(r.teardown)

	r.must(t, "truncate", "-s", strconv.Itoa(powercutImageSize), r.image)
	mkfs := []string{"-q", r.image}
	if fsType == "xfs" {
		mkfs = []string{"-q", "-f", r.image}
	}
	r.must(t, "mkfs."+fsType, mkfs...)
	r.attach(t)
	r.sk.cfgPath, r.sk.key = powercutConfig(t, filepath.Join(r.mnt, "data"))
	return r
}

// must runs a command and fails the test with its output when it fails.
func (r *powercutRig) must(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}

// attach puts the image behind a loop device and mounts it.
func (r *powercutRig) attach(t *testing.T) {
	loop := r.must(t, "losetup", "--find", "--show", r.image)
	r.mu.Lock()
	r.loop = loop
	r.mu.Unlock()
	r.must(t, "mount", "-t", r.fsType, loop, r.mnt)
	r.mu.Lock()
	r.mounted = true
	r.mu.Unlock()
}

// detach unmounts the file system and detaches its loop device.
func (r *powercutRig) detach(t *testing.T) {
	r.mu.Lock()
	loop := r.loop
	r.mu.Unlock()
	r.must(t, "umount", r.mnt)
	r.mu.Lock()
	r.mounted = false
	r.mu.Unlock()
	r.must(t, "losetup", "--detach", loop)
	r.mu.Lock()
	r.loop = ""
	r.mu.Unlock()
}

// teardown kills the server (by its PID), unmounts, detaches and removes
// the image, whatever of it there is; it runs once.
func (r *powercutRig) teardown() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	if r.proc != nil {
		_ = r.proc.cmd.Process.Signal(syscall.SIGKILL)
		<-r.proc.exited
	}
	if r.mounted {
		if exec.Command("umount", r.mnt).Run() != nil {
			_ = exec.Command("umount", "-l", r.mnt).Run()
		}
	}
	if r.loop != "" {
		_ = exec.Command("losetup", "--detach", r.loop).Run()
	}
	_ = os.Remove(r.image)
	// Empty once unmounted (rmdir fails otherwise); t.TempDir's cleanup
	// does not run on a signal.
	_ = os.Remove(r.mnt)
	if r.stopSignals != nil {
		r.stopSignals()
	}
}

// start runs the server and waits until it serves; false when it did not
// (a store that failed to open, counted).
func (r *powercutRig) start() bool {
	p := r.sk.spawn()
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	start := time.Now()
	if !r.sk.waitReady(p) {
		r.failedOpens++
		return false
	}
	r.restarts = append(r.restarts, time.Since(start))
	return true
}

// kill kills the server with SIGKILL, by its PID.
func (r *powercutRig) kill() {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p != nil {
		r.sk.kill(p)
	}
}

// cut cuts the power: the file system stops where it is, without
// writing back its log, and the server is killed.
func (r *powercutRig) cut(t *testing.T) {
	d, err := os.Open(r.mnt)
	require.NoError(t, err)
	err = unix.IoctlSetPointerInt(int(d.Fd()), powercutIoctl, powercutNoLogFlush)
	_ = d.Close()
	require.NoError(t, err, "the file-system shutdown ioctl")
	r.kill()
}

// remount is the machine's restart after a cut: the file system's own
// journal recovers at mount.
func (r *powercutRig) remount(t *testing.T) {
	r.detach(t)
	r.attach(t)
}

// powercutConfig is soakConfig's with the data directory at dataDir.
// The store runs with the durability POWERCUT_DURABILITY names (journal,
// the default, or syncwrites: storage.badger.durability).
func powercutConfig(t *testing.T, dataDir string) (path, key string) {
	durability, _ := durabilityYAML(t, "POWERCUT_DURABILITY")
	path = filepath.Join(t.TempDir(), "rxgate.yaml")
	key = "powercut-key-" + storage.NewSecret()
	require.NoError(t, os.WriteFile(path, []byte(`
http:
  listen: 127.0.0.1:`+strconv.Itoa(freePort(t))+`
admin:
  listen: 127.0.0.1:`+strconv.Itoa(freePort(t))+`
  api_key: `+key+`
storage:
  dir: `+dataDir+durability+`
auth:
  builtin_issuer: true
webhooks:
  allow_insecure_loopback: true
  timeout: 2s
  backoff_base: 100ms
  backoff_max: 1s
`), 0o600))
	return path, key
}

// run runs the cycles of one mode and reports.
func (r *powercutRig) run(t *testing.T, crashFirst bool, cuts int) {
	rcv := newSoakReceiver()
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	t.Cleanup(rcv.releaseAll)
	require.True(t, r.start(), "the first start")
	p := r.proc
	env, ld := newSoakLoad(t, p.baseURL, p.adminURL, r.sk.key, rcv, srv.URL+"/")
	tn, patients := ld.tn, ld.patients
	var cursors []soakCursor
	var seenTotal int
	var before []string // the last cycle's patients: cursors come from their lists
	r.restarts = nil    // the first start made the store

	for r.cycles < cuts && !t.Failed() {
		// This cycle's creates go to new patients: checking it lists
		// only them.
		var mine []string
		for range powercutPatients {
			mine = append(mine, newPatient(t, env, tn, testsuite.RolePrescriber, nil))
		}
		ld.createPatients = mine
		lo := ld.seq.Load() + 1
		stop := ld.start()
		// seen: what a reader saw or a partner was sent; it must survive.
		seen := map[string]bool{}
		// atKill is the last create sent before the kill (crashFirst): a
		// loss at or under it was written by the killed process.
		var atKill int64
		if crashFirst {
			time.Sleep(100*time.Millisecond + time.Duration(rand.Int64N(int64(1400*time.Millisecond))))
			r.kill()
			stop()
			atKill = ld.seq.Load()
			if !r.start() {
				break
			}
			for s := range ld.listed(t, mine) {
				seen[s] = true
			}
			stop = ld.start()
			time.Sleep(time.Duration(rand.Int64N(int64(2 * time.Second))))
		} else {
			time.Sleep(300*time.Millisecond + time.Duration(rand.Int64N(int64(2700*time.Millisecond))))
		}
		if len(cursors) < soakMaxCursors && len(before) > 0 && rand.IntN(3) == 0 {
			if c, ok := cursorOf(ld, before[rand.IntN(len(before))]); ok {
				cursors = append(cursors, c)
			}
		}
		r.cut(t)
		stop()
		r.cycles++
		hi := ld.seq.Load()
		// Every webhook answered 200 before the cut named a prescription.
		rcv.mu.Lock()
		for n := lo; n <= hi; n++ {
			if s := fmt.Sprintf("SK%016d", n); rcv.okSCID[s] {
				seen[s] = true
			}
		}
		rcv.mu.Unlock()
		seenTotal += len(seen)

		r.remount(t)
		if rand.Float64() < powercutStartupCuts {
			// A cut while the server starts (replays, syncs): the next
			// start must open the store all the same.
			r.mu.Lock()
			r.proc = r.sk.spawn()
			r.mu.Unlock()
			time.Sleep(time.Duration(rand.Int64N(int64(200 * time.Millisecond))))
			r.cut(t)
			r.startupCuts++
			r.remount(t)
		}
		if !r.start() {
			break
		}
		listed := ld.listed(t, mine)
		ld.mu.Lock()
		for s, patient := range ld.acked {
			if slices.Contains(mine, patient) && !listed[s] {
				r.lost++
				t.Logf("cycle %d: acknowledged create %s is gone after the cut (the last create sent before a kill: %d)", r.cycles, s, atKill)
			}
		}
		ld.mu.Unlock()
		for s := range seen {
			if !listed[s] {
				r.gone++
				t.Logf("cycle %d: %s, listed or delivered before the cut, is gone after it (the last create sent before a kill: %d)", r.cycles, s, atKill)
			}
		}
		r.lostUpdate += ld.checkUpdates(t, env)
		before = mine
		if r.cycles%10 == 0 {
			ld.checkCursors(t, cursors) // the count is taken at the end
		}
		if r.cycles%25 == 0 {
			t.Logf("%d cuts: %d creates acknowledged, %d lost, %d seen then gone", r.cycles, len(ld.acked), r.lost, r.gone)
		}
	}

	// The last start: every acknowledged event must arrive, with a valid
	// signature, and every acknowledged create is listed.
	ld.mu.Lock()
	acked := maps.Clone(ld.acked)
	ld.mu.Unlock()
	undelivered := 0
	lostAtEnd, brokenCursors := 0, 0
	if !t.Failed() {
		undelivered = rcv.waitDelivered(acked, soakDrainLimit)
		ld.createPatients = nil
		all := slices.Clone(patients)
		for _, patient := range acked {
			if !slices.Contains(all, patient) {
				all = append(all, patient)
			}
		}
		listed := ld.listed(t, all)
		for s := range acked {
			if !listed[s] {
				lostAtEnd++
			}
		}
		brokenCursors = ld.checkCursors(t, cursors)
	}
	rcv.mu.Lock()
	badSigs, events := rcv.badSignatures, len(rcv.okByEvent)
	rcv.mu.Unlock()
	slices.Sort(r.restarts)
	pct := func(q float64) time.Duration {
		if len(r.restarts) == 0 {
			return 0
		}
		return r.restarts[min(len(r.restarts)-1, int(q*float64(len(r.restarts))))].Round(time.Millisecond)
	}
	_, durability := durabilityYAML(t, "POWERCUT_DURABILITY")
	t.Logf(`powercut report (%s, %s, durability %s)
  cycles (power cuts)      %d, and %d more while the server started
  restarts                 %d, restart to serving p50 %s, p99 %s, max %s
  stores that failed to open %d
  acknowledged creates     %d (%d attempts)
  acknowledged updates     %d
  lost creates             %d after a cut, %d at the end
  lost updates             %d
  seen, then gone          %d (of %d listed or delivered before a cut)
  undelivered events       %d (%d delivered), bad signatures %d
  cursors checked          %d, %d broken`,
		r.fsType, map[bool]string{false: "cut under load", true: "kill -9, restart, cut"}[crashFirst], durability,
		r.cycles, r.startupCuts, len(r.restarts), pct(0.5), pct(0.99), pct(1),
		r.failedOpens,
		len(acked), ld.createAttempts.Load(), ld.updatesAcked(),
		r.lost, lostAtEnd, r.lostUpdate, r.gone, seenTotal,
		undelivered, events, badSigs, len(cursors), brokenCursors)
	if r.lost+lostAtEnd+r.lostUpdate+r.gone+r.failedOpens+undelivered+badSigs+brokenCursors > 0 {
		t.Errorf("the power cuts lost writes or deliveries: see the report")
	}
	require.NotZero(t, len(acked), "the load acknowledged nothing")
	r.kill()
}

// cursorOf is soakLoad.cursor on the given patient: the cursor after its
// first page, and the page it leads to.
func cursorOf(l *soakLoad, patient string) (soakCursor, bool) {
	_, next, _, err := l.page(patient, "", 10)
	if err != nil || next == "" {
		return soakCursor{}, false
	}
	scids, _, _, err := l.page(patient, next, 10)
	if err != nil || len(scids) == 0 {
		return soakCursor{}, false
	}
	return soakCursor{patient: patient, cursor: next, scids: scids}, true
}
