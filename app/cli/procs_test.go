package cli

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/rxgate/rxgate/config"
)

// TestTuneProcs: serving from Badger on disk adds syncProcs to Go's
// default GOMAXPROCS, however often it runs; an operator's GOMAXPROCS, a
// PostgreSQL store and an in-memory one keep what they have.
func TestTuneProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	store := func(driver string, inMemory bool) *config.Config {
		cfg := config.Defaults()
		cfg.Storage.Driver, cfg.Storage.InMemory = driver, inMemory
		return cfg
	}
	tests := []struct {
		name   string
		cfg    *config.Config
		envSet bool
		want   int
	}{
		{"badger on disk", store(config.DriverBadger, false), false, def + syncProcs},
		{"badger on disk again", store(config.DriverBadger, false), false, def + syncProcs},
		{"GOMAXPROCS set", store(config.DriverBadger, false), true, 7},
		{"postgres", store(config.DriverPostgres, false), false, 7},
		{"in memory", store(config.DriverBadger, true), false, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == 7 {
				runtime.GOMAXPROCS(7)
			}
			tuneProcs(tt.cfg, tt.envSet)
			assert.Equal(t, tt.want, runtime.GOMAXPROCS(0))
		})
	}
}
