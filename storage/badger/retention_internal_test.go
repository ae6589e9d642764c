package badger

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	badgerdb "github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// dirBytes is the disk space the files of dir take (allocated blocks,
// so that Badger's preallocated logs count for what they hold).
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += allocated(info)
		return nil
	}))
	return n
}

// BenchmarkPurgeDiskSpace measures what purging 100,000 events gives back:
// the store's size on disk with 100,000 prescriptions and their (skipped)
// events, and after the events are purged, compacted and the value log
// collected. It reports megabytes (go test -bench BenchmarkPurgeDiskSpace
// -benchtime 1x ./storage/badger).
func BenchmarkPurgeDiskSpace(b *testing.B) {
	events := 100_000
	if n, err := strconv.Atoi(os.Getenv("RXGATE_TEST_PURGE_EVENTS")); err == nil && n > 0 {
		events = n
	}
	for b.Loop() {
		dir := b.TempDir()
		s, err := Open(Options{Dir: dir})
		require.NoError(b, err)
		ctx := b.Context()
		p := &storage.Partner{Name: "P"}
		require.NoError(b, s.CreatePartner(ctx, p))
		o := &storage.Organization{Name: "O", PartnerID: p.ID}
		require.NoError(b, s.CreateOrganization(ctx, o))
		u := &storage.User{OrgID: o.ID, Email: "u@example.com"}
		require.NoError(b, s.CreateUser(ctx, u))
		pt := &storage.Patient{OrgID: o.ID, UserID: u.ID}
		require.NoError(b, s.CreatePatient(ctx, pt))
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(events); i = next.Add(1) {
					rx := storage.Prescription{OrgID: o.ID, UserID: u.ID, PatientID: pt.ID,
						PrescriptionItem: storage.PrescriptionItem{ItemName: "Amoxicillin " + strconv.FormatInt(i, 10), Quantity: "20",
							ItemStrength: "500 mg", ItemForm: "capsule", PatientInstructions: "One capsule three times a day"}}
					if err := s.CreatePrescription(ctx, &rx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		require.NoError(b, s.Close())
		compact(b, dir)
		before := dirBytes(b, dir)

		s, err = Open(Options{Dir: dir})
		require.NoError(b, err)
		start := time.Now()
		n, err := s.PurgeEvents(ctx, time.Now().Add(time.Hour))
		require.NoError(b, err)
		require.Equal(b, events, n)
		took := time.Since(start)
		require.NoError(b, s.Close())
		compact(b, dir)
		s, err = Open(Options{Dir: dir})
		require.NoError(b, err)
		require.NoError(b, s.CollectGarbage())
		require.NoError(b, s.Close())
		after := dirBytes(b, dir)
		b.ReportMetric(float64(before)/(1<<20), "MB-before")
		b.ReportMetric(float64(after)/(1<<20), "MB-after")
		b.ReportMetric(took.Seconds(), "purge-s")
	}
}

// compact runs, on the closed store in dir, the compaction Badger runs by
// itself once level 0 holds five tables (a busy store gets there within
// minutes; this one is small): it pushes every table to the levels below,
// which drops the versions deleted or overwritten.
func compact(b *testing.B, dir string) {
	b.Helper()
	db, err := badgerdb.OpenManaged(badgerdb.DefaultOptions(dir).WithLogger(nil).WithNumLevelZeroTables(1).WithNumVersionsToKeep(1))
	require.NoError(b, err)
	db.SetDiscardTs(db.MaxVersion())
	require.NoError(b, db.Flatten(2))
	require.NoError(b, db.Close())
}
