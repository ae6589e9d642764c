package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// TestMapErr: the database's answers become the contract's sentinels,
// and an unreachable database ErrUnavailable (503), never a bare error
// (500); what is said never quotes the connection string.
func TestMapErr(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, refused := pgx.Connect(ctx, "postgres://rxgate:hunter2-secret@127.0.0.1:1/rxgate?connect_timeout=2")
	require.Error(t, refused)
	tests := []struct {
		name string
		err  error
		want error // nil: passed on as it is
	}{
		{name: "no row", err: fmt.Errorf("scan: %w", pgx.ErrNoRows), want: storage.ErrNotFound},
		{name: "unique violation", err: &pgconn.PgError{Code: "23505", ConstraintName: "users_pkey"}, want: storage.ErrAlreadyExists},
		{name: "missing parent", err: &pgconn.PgError{Code: "23503"}, want: storage.ErrNotFound},
		{name: "admin shutdown", err: &pgconn.PgError{Code: "57P01"}, want: storage.ErrUnavailable},
		{name: "cannot connect now", err: &pgconn.PgError{Code: "57P03"}, want: storage.ErrUnavailable},
		{name: "statement timeout", err: &pgconn.PgError{Code: "57014"}, want: storage.ErrUnavailable},
		{name: "lock timeout", err: &pgconn.PgError{Code: "55P03"}, want: storage.ErrUnavailable},
		{name: "idle in transaction timeout", err: &pgconn.PgError{Code: "25P03"}, want: storage.ErrUnavailable},
		{name: "too many connections", err: &pgconn.PgError{Code: "53300"}, want: storage.ErrUnavailable},
		{name: "disk full", err: &pgconn.PgError{Code: "53100"}, want: storage.ErrUnavailable},
		{name: "connection failure", err: &pgconn.PgError{Code: "08006"}, want: storage.ErrUnavailable},
		{name: "read-only standby", err: &pgconn.PgError{Code: "25006"}, want: storage.ErrUnavailable},
		{name: "a bug of ours", err: &pgconn.PgError{Code: "42P01"}, want: nil},
		{name: "connection refused", err: refused, want: storage.ErrUnavailable},
		{name: "connection lost", err: fmt.Errorf("read: %w", io.ErrUnexpectedEOF), want: storage.ErrUnavailable},
		{name: "timed out", err: fmt.Errorf("query: %w", context.DeadlineExceeded), want: storage.ErrUnavailable},
		{name: "the caller gave up", err: fmt.Errorf("query: %w", context.Canceled), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mapErr(tt.err)
			if tt.want == nil {
				for _, sentinel := range []error{storage.ErrNotFound, storage.ErrAlreadyExists, storage.ErrUnavailable} {
					assert.NotErrorIs(t, got, sentinel)
				}
				return
			}
			assert.ErrorIs(t, got, tt.want)
			assert.NotContains(t, got.Error(), "hunter2-secret")
			assert.NotContains(t, got.Error(), "rxgate@")
		})
	}
	assert.True(t, errors.Is(mapErr(refused), storage.ErrUnavailable))
}
