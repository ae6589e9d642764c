package app

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
)

// serveTestApp builds an App on an in-memory store with the built-in issuer
// and serves it on loopback: the verifier reads the issuer's keys over
// HTTP, from the partner listener, while tests drive the handler directly.
// Everything stops when the test ends.
func serveTestApp(tb testing.TB, opts Options) (*App, *storage.Store) {
	tb.Helper()
	cfg := config.Defaults()
	cfg.Storage.InMemory = true
	cfg.Auth.BuiltinIssuer = true
	cfg.HTTP.Listen, cfg.Admin.Listen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Admin.APIKey = "test-admin-key-0123456789"
	require.NoError(tb, cfg.Validate())
	store, err := storage.Open(storage.Options{InMemory: true})
	require.NoError(tb, err)
	a, err := New(cfg, store, opts)
	if err != nil {
		_ = store.Close()
		require.NoError(tb, err)
	}
	served := make(chan error, 1)
	go func() { served <- a.Serve() }()
	tb.Cleanup(func() {
		assert.NoError(tb, a.Shutdown(context.Background()))
		assert.NoError(tb, <-served)
		assert.NoError(tb, store.Close())
	})
	return a, store
}
