package cli

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage/badger"
)

// TestAuditKeyWarning: without audit.key_file the server warns that the
// key lives in the store, except for a store in memory, whose trail is
// gone at the stop anyway (the sandbox's default).
func TestAuditKeyWarning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		inMemory bool
		warn     bool
	}{
		{name: "store on disk", inMemory: false, warn: true},
		{name: "store in memory", inMemory: true, warn: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := badger.Options{InMemory: tt.inMemory}
			if !tt.inMemory {
				opts.Dir = t.TempDir()
			}
			store, err := badger.Open(opts)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, store.Close()) })
			cfg := config.Defaults()
			cfg.Storage.InMemory = tt.inMemory
			var logs bytes.Buffer
			key, err := auditKey(t.Context(), cfg, store, slog.New(slog.NewTextHandler(&logs, nil)))
			require.NoError(t, err)
			require.NotEmpty(t, key)
			require.Equal(t, tt.warn, bytes.Contains(logs.Bytes(), []byte("audit.key_file is not set")), "%s", logs.String())
		})
	}
}
