package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
	"github.com/rxgate/rxgate/testsuite/storagetest"
)

// TestConformance runs the storage conformance suite on PostgreSQL, each
// test in a schema of its own, as a replica (conformanceReplica), which
// restarts after a crash (restartReplica). Without
// RXGATE_TEST_POSTGRES_URL it skips with one line naming it.
func TestConformance(t *testing.T) {
	testsuite.PostgresURL(t)
	storagetest.Run(t, openConformance, storagetest.Small(), storagetest.WithRestart(restartReplica))
}

// conformanceReplica is the replica id of the conformance suite's stores,
// one to a schema.
const conformanceReplica = "conformance"

// conformanceStore is a store of openConformance's, which a restart
// replaces.
type conformanceStore struct{ s *postgres.Store }

// conformanceStores are openConformance's stores, by their current
// *postgres.Store.
var conformanceStores sync.Map

// openConformance is the suite's Opener: a replica in a fresh schema,
// with the testsuite's pool settings, dropped and closed when t ends.
func openConformance(t testing.TB, now func() time.Time) (storage.Store, storage.JobStore) {
	c := &conformanceStore{s: openConformanceStore(t, testsuite.NewSchema(), now)}
	conformanceStores.Store(c.s, c)
	t.Cleanup(func() {
		assert.NoError(t, c.s.DropSchema(context.Background()))
		assert.NoError(t, c.s.Close())
	})
	return c.s, c.s
}

func openConformanceStore(t testing.TB, schema string, now func() time.Time) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Options{
		URL: testsuite.PostgresURL(t), Schema: schema, Now: now, MaxConns: 8, ConnectTimeout: 10 * time.Second,
		ReplicaID: conformanceReplica,
	})
	require.NoError(t, err, "opening the PostgreSQL store")
	return s
}

// restartReplica is the suite's Restarter: the replica crashes (Crash)
// and opens again under its id in its schema.
func restartReplica(t testing.TB, s storage.Store, now func() time.Time) (storage.Store, storage.JobStore) {
	v, ok := conformanceStores.LoadAndDelete(s)
	require.True(t, ok, "a store of openConformance's")
	c := v.(*conformanceStore)
	c.s.Crash()
	c.s = openConformanceStore(t, c.s.Schema(), now)
	conformanceStores.Store(c.s, c)
	return c.s, c.s
}
