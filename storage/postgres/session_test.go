package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/testsuite"
)

// openPostgres opens a store with opts, on RXGATE_TEST_POSTGRES_URL and
// in a fresh schema of its own unless opts name others, closed and its
// schema dropped when t ends.
func openPostgres(t testing.TB, opts postgres.Options) *postgres.Store {
	t.Helper()
	if opts.URL == "" {
		opts.URL = testsuite.PostgresURL(t)
	}
	if opts.Schema == "" {
		opts.Schema = testsuite.NewSchema()
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	s, err := postgres.Open(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, s.DropSchema(context.Background()))
		assert.NoError(t, s.Close())
	})
	return s
}

// sessionSettings are the settings the store sets on its connections.
var sessionSettings = []string{
	"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout",
	"tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout",
}

// show reads the sessionSettings of conn's session, as SHOW gives them.
func show(t testing.TB, conn interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, name := range sessionSettings {
		var v string
		require.NoError(t, conn.QueryRow(t.Context(), "SHOW "+name).Scan(&v), "SHOW %s", name)
		got[name] = v
	}
	return got
}

// TestSessionSettings: the timeouts and the server's keepalives reach
// every session the store opens, the pool's (the one that ran the
// migrations, which lifts two of them while it works, too) and the
// listener's; a setting left at 0 is not sent, so the server's own
// stays. The test connects over TCP, where the server applies its
// keepalive settings.
func TestSessionSettings(t *testing.T) {
	testsuite.PostgresURL(t)
	t.Parallel()
	// The server's own values, for the settings the store leaves alone.
	conn, err := pgx.Connect(t.Context(), testsuite.PostgresURL(t))
	require.NoError(t, err)
	server := show(t, conn)
	require.NoError(t, conn.Close(t.Context()))

	tests := []struct {
		name string
		opts postgres.Options
		want map[string]string
	}{
		{
			name: "set",
			opts: postgres.Options{StatementTimeout: 3 * time.Second, LockTimeout: 2 * time.Second,
				IdleInTransactionTimeout: 4 * time.Second, NetworkTimeout: 20 * time.Second},
			// Keepalives: half the network timeout idle, then five probes
			// a tenth of it apart; tcp_user_timeout shows in milliseconds.
			want: map[string]string{"statement_timeout": "3s", "lock_timeout": "2s", "idle_in_transaction_session_timeout": "4s",
				"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "2", "tcp_keepalives_count": "5", "tcp_user_timeout": "20000"},
		},
		{name: "left to the server", opts: postgres.Options{}, want: server},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.opts.MaxConns = 2
			s := openPostgres(t, tt.opts)
			// Both of the pool's connections at once: one of them ran
			// the migrations.
			var conns []*pgxpool.Conn
			for range 2 {
				c, err := s.Pool().Acquire(t.Context())
				require.NoError(t, err)
				conns = append(conns, c)
			}
			for i, c := range conns {
				assert.Equal(t, tt.want, show(t, c), "pooled connection %d", i)
				c.Release()
			}
			listen, err := s.ListenConn(t.Context())
			require.NoError(t, err)
			defer listen.Close(context.Background())
			assert.Equal(t, tt.want, show(t, listen), "the LISTEN connection")
		})
	}
}
