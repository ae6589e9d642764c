package postgres_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// envURL names the database the PostgreSQL tests use; without it they
// skip. Each test works in a schema of its own, dropped when it ends.
const envURL = "RXGATE_TEST_POSTGRES_URL"

func databaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(envURL)
	if u == "" {
		t.Skipf("postgres: set %s (for example postgres://postgres@127.0.0.1:5432/test) to run the PostgreSQL tests", envURL)
	}
	return u
}

// open opens a store in a fresh schema and drops the schema when t ends.
func open(t testing.TB, now func() time.Time) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Options{
		URL: databaseURL(t), Schema: "t_" + strings.ReplaceAll(storage.NewID(), "-", "_"), MaxConns: 4, Now: now,
		ConnectTimeout: 10 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, s.DropSchema(context.Background()))
		require.NoError(t, s.Close())
	})
	return s
}

func TestConformance(t *testing.T) {
	databaseURL(t)
	storagetest.Run(t, func(t testing.TB, now func() time.Time) (storage.Store, storage.JobStore) {
		s := open(t, now)
		return s, s
	}, storagetest.Small())
}
