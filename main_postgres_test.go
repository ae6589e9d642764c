package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

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
			// migrateCmd, not run: run sets the process's version, once
			// per process; two replicas are two processes.
			if err := migrateCmd(context.Background(), nil, &stdout, &stderr); err != nil {
				codes[i] = 1
				stderr.WriteString(err.Error())
			}
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
	assert.Equal(t, newest, n, "each migration applied once")
}

// TestDatabaseDownAtStart: serve with no database answering waits
// storage.postgres.connect_timeout, then exits non-zero with one clear
// line that does not quote the URL's password.
func TestDatabaseDownAtStart(t *testing.T) {
	t.Setenv("RXGATE_STORAGE__DRIVER", "postgres")
	t.Setenv("RXGATE_STORAGE__POSTGRES__URL", "postgres://rxgate:hunter2-secret@127.0.0.1:1/rxgate")
	t.Setenv("RXGATE_STORAGE__POSTGRES__CONNECT_TIMEOUT", "1s")
	t.Setenv("RXGATE_ADMIN__API_KEY", "test-"+strings.Repeat("k", 32))
	t.Setenv("RXGATE_AUTH__BUILTIN_ISSUER", "true")
	t.Setenv("RXGATE_HTTP__LISTEN", "127.0.0.1:0")
	t.Setenv("RXGATE_ADMIN__LISTEN", "127.0.0.1:0")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(context.Background(), []string{"serve"}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Less(t, time.Since(start), time.Minute, "the wait is bounded")
	assert.Contains(t, stderr.String(), "no database answered within 1s")
	assert.NotContains(t, stderr.String(), "hunter2-secret")
}
