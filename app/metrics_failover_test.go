package app

import (
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
)

// failoverStore is a job store that follows a primary (storage.FailoverCounter)
// with counts the test sets.
type failoverStore struct {
	*badger.Store
	resets, unconfirmed atomic.Int64
}

func (s *failoverStore) FailoverCounts() storage.FailoverCounts {
	return storage.FailoverCounts{PoolResets: s.resets.Load(), UnconfirmedCommits: s.unconfirmed.Load()}
}

// counterOf gathers m's registry and returns the value of the counter
// name, and whether it is exposed.
func counterOf(t *testing.T, m *Metrics, name string) (float64, bool) {
	t.Helper()
	families, err := m.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			require.Equal(t, dto.MetricType_COUNTER, f.GetType(), name)
			require.Len(t, f.GetMetric(), 1, name)
			return f.GetMetric()[0].GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// TestFailoverMetrics: a store that follows a primary has its pool resets
// and unconfirmed commits exposed as counters that follow its counts; a
// store that does not (Badger) exposes neither.
func TestFailoverMetrics(t *testing.T) {
	t.Parallel()
	b, err := badger.Open(badger.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close()) })

	plain := NewMetrics()
	plain.WatchStore(b, time.Now)
	for _, name := range []string{"rxgate_postgres_pool_resets_total", "rxgate_postgres_unconfirmed_commits_total"} {
		_, ok := counterOf(t, plain, name)
		assert.False(t, ok, "%s without a FailoverCounter", name)
	}

	s := &failoverStore{Store: b}
	m := NewMetrics()
	m.WatchStore(s, time.Now)
	for _, name := range []string{"rxgate_postgres_pool_resets_total", "rxgate_postgres_unconfirmed_commits_total"} {
		v, ok := counterOf(t, m, name)
		require.True(t, ok, "%s is exposed", name)
		assert.Zero(t, v, name)
	}
	s.resets.Add(1)
	v, _ := counterOf(t, m, "rxgate_postgres_pool_resets_total")
	assert.EqualValues(t, 1, v, "a reset counted")
	s.resets.Add(2)
	s.unconfirmed.Add(1)
	v, _ = counterOf(t, m, "rxgate_postgres_pool_resets_total")
	assert.EqualValues(t, 3, v)
	v, _ = counterOf(t, m, "rxgate_postgres_unconfirmed_commits_total")
	assert.EqualValues(t, 1, v, "an unconfirmed commit counted")
}
