package cli

import (
	"runtime"

	"github.com/rxgate/rxgate/config"
)

// syncProcs is how many processors (Go's Ps) rxgate adds to Go's default
// (one per CPU it may use) when it serves from Badger on disk. Go hands a
// goroutine's P to another only some time after the goroutine has entered
// a system call; Badger's writer spends most of its time in the disk's
// syncs, so on a small machine a P is often held by a goroutine waiting
// for the disk while runnable goroutines wait for one. Two more was the
// best setting of durable creates at concurrency 8 on a 2-core machine
// (testsuite BenchmarkLoad; one more helped less, four or six no more than
// two). A PostgreSQL store waits on the network, which does not hold a P.
const syncProcs = 2

// tuneProcs sets GOMAXPROCS for cfg's store, unless the environment set it
// (envSet): the operator's choice stands.
func tuneProcs(cfg *config.Config, envSet bool) {
	if envSet || cfg.Storage.Driver != config.DriverBadger || cfg.Storage.InMemory {
		return
	}
	runtime.SetDefaultGOMAXPROCS() // from the default, however often it runs
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + syncProcs)
}
