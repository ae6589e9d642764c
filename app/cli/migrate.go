package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage/postgres"
)

// Migrate opens the configured store, which applies its migrations, and
// closes it: for deployments that migrate before they roll out replicas.
// Replicas that start together also migrate safely (under a lock).
func Migrate(ctx context.Context, env Env, args []string) error {
	fs := newFlagSet("migrate", env.Stderr)
	configPath := fs.String("config", "", "YAML config file (storage section)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(config.Options{Path: *configPath, Environ: os.Environ()})
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg, newLogger(cfg, env.Stderr), forTool)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if cfg.Storage.Driver == config.DriverPostgres {
		fmt.Fprintf(env.Stdout, "rxgate %s: the PostgreSQL schema is at version %d\n", env.Version, postgres.SchemaVersion())
	} else {
		fmt.Fprintf(env.Stdout, "rxgate %s: the store in %s is at this version's format\n", env.Version, cfg.Storage.Dir)
	}
	return nil
}
