package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/storage/postgres"
)

// storeUse says what a process opens its store for.
type storeUse int

const (
	// forTool is a command that works on the store and exits (migrate):
	// it delivers nothing, so it takes no replica id and may run beside
	// the replicas.
	forTool storeUse = iota
	// forServing is `rxgate serve`: a PostgreSQL store is opened under
	// the replica's id (storage.postgres.replica_id, the host name by
	// default), which takes back the leases a crashed predecessor under
	// the id left and is refused while another live process holds it.
	forServing
)

// openStore opens the configured store, migrating its schema or format
// to this version: the one place a backend is picked. A PostgreSQL store
// is waited for up to storage.postgres.connect_timeout.
func openStore(ctx context.Context, cfg *config.Config, logger *slog.Logger, use storeUse) (storage.Backend, error) {
	return openStoreAt(ctx, cfg, logger, use, nil)
}

// openStoreAt is openStore with the store's clock (nil: the real one).
func openStoreAt(ctx context.Context, cfg *config.Config, logger *slog.Logger, use storeUse, now func() time.Time) (storage.Backend, error) {
	if cfg.Storage.Driver == config.DriverPostgres {
		pg := cfg.Storage.Postgres
		replica := ""
		if use == forServing {
			replica = pg.ReplicaName()
		}
		return postgres.Open(ctx, postgres.Options{
			ReplicaID: replica, Now: now,
			URL: pg.URL, MaxConns: int32(pg.MaxConns), ConnectTimeout: pg.ConnectTimeout, Logger: logger,
			MaxRecordBytes:   cfg.Storage.MaxRecordBytes,
			StatementTimeout: pg.StatementTimeout, LockTimeout: pg.LockTimeout,
			IdleInTransactionTimeout: pg.IdleInTransactionTimeout, NetworkTimeout: pg.NetworkTimeout,
			NoListen: !pg.Listen,
		})
	}
	key, err := readKey("storage.encryption_key_file", cfg.Storage.EncryptionKeyFile)
	if err != nil {
		return nil, err
	}
	return badger.Open(badger.Options{Dir: cfg.Storage.Dir, InMemory: cfg.Storage.InMemory, MaxRecordBytes: cfg.Storage.MaxRecordBytes, EncryptionKey: key, Logger: logger, Now: now,
		JournalSkipCorrupt: cfg.Storage.JournalSkipCorrupt, Durability: badger.Durability(cfg.Storage.Badger.Durability)})
}
