package badger

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage/backup"
)

// The helper process of TestRestoreSurvivesKill reads the backup, the
// target and the step to stop at from these variables.
const (
	restoreChild     = "RXGATE_TEST_RESTORE_CHILD" // the backup file
	restoreChildDir  = "RXGATE_TEST_RESTORE_CHILD_DIR"
	restoreChildStop = "RXGATE_TEST_RESTORE_CHILD_STOP"
)

// restoreKillEntries is the size of TestRestoreSurvivesKill's backup; a
// restore killed among the entries stops after half of them.
const restoreKillEntries = 20_000

// TestRestoreChild is the process TestRestoreSurvivesKill kills: it
// restores a backup, and at the step it is told (after half the entries,
// for stepEntry) says so and waits to be killed.
func TestRestoreChild(t *testing.T) {
	path := os.Getenv(restoreChild)
	if path == "" {
		t.Skip("the helper process of TestRestoreSurvivesKill")
	}
	stop := os.Getenv(restoreChildStop)
	entries := 0
	restoreStep = func(step string) {
		if step == stepEntry {
			entries++
			if entries != restoreKillEntries/2 {
				return
			}
		}
		if step != stop {
			return
		}
		fmt.Println("stopped at " + step)
		// Blocks until the parent kills this process, or has gone itself.
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(2)
	}
	_, err := Restore(path, os.Getenv(restoreChildDir), nil)
	t.Fatalf("the restore returned (%v) without stopping at %q", err, stop)
}

// TestRestoreSurvivesKill kills a restore with SIGKILL at each of its
// steps: among the entries, when they are all loaded, while the new store
// is open (after its migration, before its close), when it has been
// closed and synced, and after it was renamed into place. The helper process
// stops at the step and says so before it is killed, so every kill lands
// there. Until the rename the target is absent, as it was, and the
// unfinished directory is left beside it (the one an earlier kill left is
// gone); after it the target is the whole store. A restore after the
// kills succeeds and leaves nothing beside the target.
func TestRestoreSurvivesKill(t *testing.T) {
	t.Parallel()
	const entries = restoreKillEntries
	path := filepath.Join(t.TempDir(), "big.rxb")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = backup.Write(f, backup.Header{StoreFormat: formatVersion}, nil, func(emit func(k, v []byte) error) error {
		for i := range entries {
			if err := emit(fmt.Appendf(nil, "zz/%08d", i), []byte("a value of a few dozen bytes, like a small record")); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, f.Close())

	count := func(dir string) int {
		db, err := badgerdb.OpenManaged(badgerdb.DefaultOptions(dir).WithLogger(nil))
		require.NoError(t, err)
		defer db.Close()
		txn := db.NewTransactionAt(db.MaxVersion(), false)
		defer txn.Discard()
		it := txn.NewIterator(badgerdb.IteratorOptions{Prefix: []byte("zz/")})
		defer it.Close()
		n := 0
		for it.Rewind(); it.Valid(); it.Next() {
			n++
		}
		return n
	}
	parent := t.TempDir()
	dir := filepath.Join(parent, "data")
	unfinished := func() []string {
		left, err := filepath.Glob(filepath.Join(parent, ".rxgate-restore-*"))
		require.NoError(t, err)
		return left
	}
	tests := []struct {
		stop  string
		whole bool // the target holds the whole store after the kill
	}{
		{stop: stepEntry},
		{stop: stepLoaded},
		{stop: stepOpen},
		{stop: stepOpened},
		{stop: stepRenamed, whole: true},
	}
	for _, tt := range tests {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRestoreChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), restoreChild+"="+path, restoreChildDir+"="+dir, restoreChildStop+"="+tt.stop)
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		var said []string
		sc := bufio.NewScanner(out)
		for sc.Scan() && sc.Text() != "stopped at "+tt.stop {
			said = append(said, sc.Text())
		}
		require.Equal(t, "stopped at "+tt.stop, sc.Text(), "the helper reached step %s; it said %q", tt.stop, said)
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		_ = stdin.Close()
		if tt.whole {
			require.Equal(t, entries, count(dir), "killed at %s: the target holds the whole store", tt.stop)
			require.Empty(t, unfinished(), "killed at %s: nothing is left beside the target", tt.stop)
			require.NoError(t, os.RemoveAll(dir))
			continue
		}
		_, err = os.Stat(dir)
		require.ErrorIs(t, err, fs.ErrNotExist, "killed at %s: the target is absent, as it was", tt.stop)
		require.Len(t, unfinished(), 1, "killed at %s: the unfinished directory is left, and only it", tt.stop)
	}
	_, err = Restore(path, dir, nil)
	require.NoError(t, err, "a restore after kills succeeds")
	require.Equal(t, entries, count(dir))
	require.Empty(t, unfinished(), "a restore removes what killed ones left")
}
