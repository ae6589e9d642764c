package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/openapi"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
)

// TestDefaultsAgree: config imports no rxgate package, so the defaults it
// states are also written where they are used; they must stay one value.
func TestDefaultsAgree(t *testing.T) {
	t.Parallel()
	d := config.Defaults()
	require.Equal(t, openapi.DefaultMaxBulkDrugs, d.HTTP.MaxBulkDrugs, "the partner document states the default bulk limit")
	require.Equal(t, storage.MaxRecordBytes, d.Storage.MaxRecordBytes, "a store opened without the setting bounds records as the default")
}
