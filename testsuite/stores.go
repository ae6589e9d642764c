package testsuite

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/storage/postgres"
)

// The backends the kit runs in-process servers on.
const (
	// EnvStore selects the backend of in-process servers: "badger" (the
	// default) or "postgres", which needs EnvPostgresURL.
	EnvStore = "RXGATE_TEST_STORE"
	// EnvPostgresURL names a PostgreSQL database the tests may use; each
	// store they open lives in a schema of its own, dropped at the end.
	EnvPostgresURL = "RXGATE_TEST_POSTGRES_URL"
	// EnvReplicas, set by the replica test for its run of the testsuite,
	// says the target is several replicas behind a round-robin balancer.
	EnvReplicas = "RXGATE_TEST_REPLICAS"
)

// BehindReplicas reports whether the target is several replicas behind a
// round-robin balancer.
func BehindReplicas() bool { return os.Getenv(EnvReplicas) != "" }

// PostgresURL returns EnvPostgresURL, or skips t with one line naming it.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvPostgresURL)
	if u == "" {
		t.Skipf("testsuite: set %s (for example postgres://postgres@127.0.0.1:5432/test) to run the PostgreSQL tests", EnvPostgresURL)
	}
	return u
}

// OnPostgres reports whether in-process servers run on PostgreSQL.
func OnPostgres() bool { return os.Getenv(EnvStore) == "postgres" }

// NewSchema returns a fresh schema name for one test's store.
func NewSchema() string { return "t_" + strings.ReplaceAll(storage.NewID(), "-", "_") }

// OpenPostgres opens a PostgreSQL store in a schema of its own
// (NewSchema), closed and dropped when t ends.
func OpenPostgres(t testing.TB, now func() time.Time) *postgres.Store {
	t.Helper()
	s := openPostgres(t, postgres.Options{URL: PostgresURL(t), Schema: NewSchema(), Now: now})
	t.Cleanup(func() { assert.NoError(t, s.DropSchema(context.Background()), "testsuite: dropping the schema") })
	return s
}

// openPostgres opens a store with the kit's pool settings, closed when t
// ends (after a cleanup registered later, such as dropping its schema).
func openPostgres(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	opts.MaxConns, opts.ConnectTimeout = 8, 10*time.Second
	s, err := postgres.Open(t.Context(), opts)
	require.NoError(t, err, "testsuite: opening the PostgreSQL store")
	t.Cleanup(func() { assert.NoError(t, s.Close(), "testsuite: closing the store") })
	return s
}

// openBackend opens the store of an in-process server: Badger as cfg
// says, or PostgreSQL in a schema of its own when EnvStore says so.
func openBackend(t testing.TB, o options, maxRecord int, inMemory bool, dir string) storage.Backend {
	t.Helper()
	if o.postgresURL != "" {
		return openPostgres(t, postgres.Options{URL: o.postgresURL, Now: o.now})
	}
	if OnPostgres() {
		return OpenPostgres(t, o.now)
	}
	store, err := badger.Open(badger.Options{InMemory: inMemory, Dir: dir, MaxRecordBytes: maxRecord, Now: o.now})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, store.Close(), "testsuite: closing the store") })
	return store
}

// PostgresSchema creates an empty schema, dropped when t ends, and returns
// a connection URL whose search_path is that schema: for servers and
// commands started with only a URL (subprocesses, replicas).
func PostgresSchema(t testing.TB) string {
	t.Helper()
	base := PostgresURL(t)
	schema := NewSchema()
	conn, err := pgx.Connect(t.Context(), base)
	require.NoError(t, err, "testsuite: connecting to %s", EnvPostgresURL)
	defer conn.Close(context.Background())
	_, err = conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		assert.NoError(t, err, "testsuite: dropping the schema")
	})
	u, err := url.Parse(base)
	require.NoError(t, err, "testsuite: %s must be a URL", EnvPostgresURL)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
