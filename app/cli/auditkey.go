package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
)

// metaAuditKey names the audit key in the store when audit.key_file is
// empty.
const metaAuditKey = "audit-key"

// auditKey returns the key that signs the audit trail's checkpoints.
//
// Where it lives decides what the checkpoints prove. In audit.key_file
// (base64 of a 32-byte Ed25519 seed, the format rxgate keygen writes;
// created with mode 0600 on first start when missing, refused when group
// or others may read it), kept where those who can edit the store cannot
// reach, it makes a truncated or rewritten chain detectable even by
// someone who edits the store and recomputes every hash. Kept in the store
// (audit.key_file empty, so that an existing deployment keeps working
// without a new file), it still shows every change made by hand or by a
// tool that does not re-sign, but not a rewrite by whoever reads the key
// from the store as well: the server warns.
func auditKey(ctx context.Context, cfg *config.Config, store storage.Store, logger *slog.Logger) (ed25519.PrivateKey, error) {
	path := cfg.Audit.KeyFile
	if path == "" {
		// A store in memory (the sandbox's default) is gone at the stop,
		// with its trail: there is nothing a key kept elsewhere would
		// protect, so no warning.
		if !cfg.Storage.InMemory {
			logger.Warn("audit.key_file is not set: the audit checkpoints' key is kept in the store, so whoever can read and edit the store could rewrite the trail and re-sign it; set audit.key_file to a file out of their reach")
		}
		seed, err := store.LoadOrCreateMeta(ctx, metaAuditKey, newAuditSeed)
		if err != nil {
			return nil, fmt.Errorf("audit key: %w", err)
		}
		if len(seed) != ed25519.SeedSize {
			return nil, errors.New("audit key: the stored key is damaged")
		}
		return ed25519.NewKeyFromSeed(seed), nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := writeKeyFile(path); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("audit.key_file: %w", err)
		}
		logger.Info("created the audit key file", "path", path)
	}
	seed, err := config.ReadKeyFile("audit.key_file", path)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

func newAuditSeed() ([]byte, error) {
	seed := make([]byte, ed25519.SeedSize)
	_, err := rand.Read(seed)
	return seed, err
}

// writeKeyFile creates path, readable by its owner only, with a new key;
// it never overwrites a file.
func writeKeyFile(path string) error {
	seed, err := newAuditSeed()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, base64.StdEncoding.EncodeToString(seed)); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return err
	}
	return f.Close()
}

// startAudit starts the audit trail when audit.enabled is on and the store
// keeps one; nil otherwise. The caller stops it (stopAudit) after the
// listeners have stopped and before the store closes.
func startAudit(ctx context.Context, cfg *config.Config, store storage.Store, logger *slog.Logger) (*app.AuditTrail, error) {
	if !cfg.Audit.Enabled {
		return nil, nil
	}
	log, ok := store.(storage.AuditLog)
	if !ok {
		return nil, errors.New("audit.enabled: this store keeps no audit trail")
	}
	key, err := auditKey(ctx, cfg, store, logger)
	if err != nil {
		return nil, err
	}
	trail := app.NewAuditTrail(log, app.AuditOptions{
		Key: key, CheckpointEvery: cfg.Audit.CheckpointEvery, CheckpointInterval: cfg.Audit.CheckpointInterval, Logger: logger,
	})
	trail.Start()
	return trail, nil
}

// stopAudit appends what the trail holds and stops it.
func stopAudit(trail *app.AuditTrail, logger *slog.Logger) {
	if trail == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := trail.Stop(ctx); err != nil {
		logger.Error("the audit trail did not stop in time: its last entries may be lost", "error", err)
	}
}
