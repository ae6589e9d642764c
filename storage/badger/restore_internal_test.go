package badger

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage/backup"
)

// restoreChild names the backup and the target of the helper process.
const restoreChild = "RXGATE_TEST_RESTORE_CHILD"

// TestRestoreChild is the process TestRestoreSurvivesKill kills: it
// restores a backup and says when it has begun.
func TestRestoreChild(t *testing.T) {
	v := os.Getenv(restoreChild)
	if v == "" {
		t.Skip("the helper process of TestRestoreSurvivesKill")
	}
	var path, dir string
	_, _ = fmt.Sscanf(v, "%s %s", &path, &dir)
	fmt.Println("restoring")
	if _, err := Restore(path, dir, nil); err != nil {
		fmt.Println(err)
	}
	fmt.Println("restored")
	time.Sleep(time.Hour)
}

// TestRestoreSurvivesKill kills a restore with SIGKILL at a random moment,
// several times: the target is then either absent, as it was, or the
// whole store; never a part of it. A restore after a kill succeeds.
func TestRestoreSurvivesKill(t *testing.T) {
	t.Parallel()
	const entries = 150_000
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
	whole := 0
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRestoreChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), restoreChild+"="+path+" "+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		buf := make([]byte, len("restoring\n"))
		_, err = out.Read(buf)
		require.NoError(t, err)
		time.Sleep(time.Duration(rand.Int64N(int64(400 * time.Millisecond))))
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		if _, err := os.Stat(dir); err == nil {
			require.Equal(t, entries, count(dir), "round %d: the target holds the whole store", round)
			whole++
			require.NoError(t, os.RemoveAll(dir))
		}
	}
	t.Logf("%d of 4 kills came after the restore had finished", whole)
	_, err = Restore(path, dir, nil)
	require.NoError(t, err, "a restore after kills succeeds")
	require.Equal(t, entries, count(dir))
	left, err := filepath.Glob(filepath.Join(parent, ".rxgate-restore-*"))
	require.NoError(t, err)
	require.Empty(t, left, "a restore removes what killed ones left")
}
