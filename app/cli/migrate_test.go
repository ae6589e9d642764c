package cli

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
)

// TestMigrateTwiceAtOnce: two `rxgate migrate` runs started together (two
// replicas rolling out) both succeed and apply each migration once.
func TestMigrateTwiceAtOnce(t *testing.T) {
	url := testsuite.PostgresSchema(t)
	t.Setenv("RXGATE_STORAGE__DRIVER", "postgres")
	t.Setenv("RXGATE_STORAGE__POSTGRES__URL", url)
	var wg sync.WaitGroup
	codes, outs := make([]int, 2), make([]string, 2)
	for i := range codes {
		wg.Go(func() {
			var stdout, stderr bytes.Buffer
			codes[i] = run(context.Background(), Migrate, nil, &stdout, &stderr)
			outs[i] = stdout.String() + stderr.String()
		})
	}
	wg.Wait()
	for i := range codes {
		require.Equal(t, 0, codes[i], outs[i])
		assert.Contains(t, outs[i], "schema is at version")
		assert.NotContains(t, outs[i], url, "the URL is not echoed")
	}
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n, newest int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &newest))
	assert.Equal(t, postgres.SchemaVersion(), newest)
	var applied []int
	require.NoError(t, conn.QueryRow(t.Context(), `SELECT array_agg(version ORDER BY version) FROM schema_migrations`).Scan(&applied))
	assert.Equal(t, postgres.MigrationVersions(), applied, "each migration applied once")
	assert.Len(t, applied, n)
}
