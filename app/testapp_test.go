package app

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage/badger"
)

// newTestApp builds an App on an in-memory store with the built-in issuer.
// Nothing listens: tests drive its handlers, and the verifier reads the
// issuer's keys from the partner handler in-process. Everything stops when
// the test ends.
func newTestApp(tb testing.TB, opts Options) (*App, *badger.Store) {
	tb.Helper()
	return newTestAppWith(tb, opts, nil)
}

// newTestAppWith is newTestApp with the configuration changed by edit
// (when not nil) before it is validated.
func newTestAppWith(tb testing.TB, opts Options, edit func(*config.Config)) (*App, *badger.Store) {
	tb.Helper()
	cfg := config.Defaults()
	cfg.Storage.InMemory = true
	cfg.Auth.BuiltinIssuer = true
	cfg.HTTP.Listen, cfg.Admin.Listen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Admin.APIKey = "test-admin-key-0123456789"
	if edit != nil {
		edit(cfg)
	}
	require.NoError(tb, cfg.Validate())
	store, err := badger.Open(badger.Options{InMemory: true, MaxRecordBytes: cfg.Storage.MaxRecordBytes})
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, store.Close()) })
	a, err := New(cfg, store, opts)
	require.NoError(tb, err)
	tb.Cleanup(func() { assert.NoError(tb, a.Shutdown(context.Background())) })
	return a, store
}

// TestListenAndServe checks the lifecycle: New binds nothing, Listen binds
// both listeners, Serve answers on them, Shutdown stops it and Serve
// returns nil; a second Serve, or one before Listen, is refused.
func TestListenAndServe(t *testing.T) {
	t.Parallel()
	a, _ := newTestApp(t, Options{})
	require.Error(t, a.Serve(), "Serve before Listen")
	require.Equal(t, "http://127.0.0.1:0/external", a.BaseURL(), "before Listen, the configured address")
	require.NoError(t, a.Listen())
	require.NotContains(t, a.BaseURL(), ":0/", "after Listen, the bound address")
	served := make(chan error, 1)
	go func() { served <- a.Serve() }()
	ctx := t.Context()
	require.Eventually(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.serving
	}, 10*time.Second, time.Millisecond)
	require.Error(t, a.Serve(), "a second Serve")
	for _, u := range []string{a.BaseURL() + "/v1/openapi.json", "http://" + a.PartnerAddr() + "/readyz", a.AdminURL() + "/healthz"} {
		resp, err := httpGet(ctx, u)
		require.NoError(t, err, u)
		require.Equal(t, 200, resp, u)
	}
	require.NoError(t, a.Shutdown(context.Background()))
	require.NoError(t, <-served)
	require.NoError(t, a.Serve(), "Serve after Shutdown returns at once")
	require.Error(t, a.Listen(), "Listen after Shutdown")
}

// httpGet returns the status of a GET of u.
func httpGet(ctx context.Context, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
