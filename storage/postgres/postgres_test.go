package postgres_test

import (
	"testing"
	"time"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// TestConformance runs the storage conformance suite on PostgreSQL, each
// test in a schema of its own (testsuite.OpenPostgres). Without
// RXGATE_TEST_POSTGRES_URL it skips with one line naming it.
func TestConformance(t *testing.T) {
	testsuite.PostgresURL(t)
	storagetest.Run(t, func(t testing.TB, now func() time.Time) (storage.Store, storage.JobStore) {
		s := testsuite.OpenPostgres(t, now)
		return s, s
	}, storagetest.Small())
}
