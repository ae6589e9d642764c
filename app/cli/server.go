package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/retention"
)

// commonFlags are the flags serve and sandbox share; each set one maps to a
// config key and overrides every other layer.
type commonFlags struct {
	fs          *flag.FlagSet
	configPath  string
	listen      string
	adminListen string
	dataDir     string
}

func newCommonFlags(name string, stderr io.Writer) *commonFlags {
	f := &commonFlags{fs: newFlagSet(name, stderr)}
	f.fs.StringVar(&f.configPath, "config", "", "YAML config file")
	f.fs.StringVar(&f.listen, "listen", "", "partner API address (http.listen)")
	f.fs.StringVar(&f.adminListen, "admin-listen", "", "operator API address (admin.listen)")
	f.fs.StringVar(&f.dataDir, "data-dir", "", "data directory (storage.dir)")
	return f
}

// load reads the configuration: defaults, the file, the environment, then
// the flags set.
func (f *commonFlags) load() (*config.Config, error) {
	overrides := map[string]any{}
	if f.listen != "" {
		overrides["http.listen"] = f.listen
	}
	if f.adminListen != "" {
		overrides["admin.listen"] = f.adminListen
	}
	if f.dataDir != "" {
		overrides["storage.dir"] = f.dataDir
		overrides["storage.in_memory"] = false
	}
	return config.Load(config.Options{Path: f.configPath, Environ: os.Environ(), Flags: overrides})
}

// newLogger is the logger log.level and log.format ask for, writing to w.
func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// runServer wires the server: it opens the store, builds the webhook queue
// and the App on it, binds the listeners, starts the queue and the
// store's housekeeping, serves, calls started, and serves until ctx ends.
// Then it stops in order: the HTTP listeners drain, the queue finishes or
// returns its in-flight deliveries, the housekeeping stops, and the store
// closes last.
//
// clock, given by rxgate sandbox only, is the clock of everything the
// server runs (store, queue, App, janitor, metrics), which POST
// /admin/v1/sandbox/clock moves forward; nil is the real clock.
func runServer(ctx context.Context, cfg *config.Config, version string, logger *slog.Logger, clock *queue.OffsetClock, started func(*app.App, storage.Store) error) error {
	tuneProcs(cfg, os.Getenv("GOMAXPROCS") != "")
	now := time.Now
	if clock != nil {
		now = clock.Now
	}
	var storeNow func() time.Time
	if clock != nil {
		storeNow = clock.Now
	}
	store, err := openStoreAt(ctx, cfg, logger, forServing, storeNow)
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			logger.Error("closing the store failed", "error", err)
		}
	}()
	metrics := app.NewMetrics()
	metrics.WatchStore(store, now)
	qo := app.QueueOptions(cfg)
	qo.Logger = logger
	if clock != nil {
		qo.Clock, qo.SignatureNow = clock, time.Now
	}
	qo.Observe = metrics.ObserveDelivery
	q, err := queue.New(store, qo)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	trail, err := startAudit(ctx, cfg, store, logger)
	if err != nil {
		return err
	}
	// After every path out has stopped the listeners (stop), before the
	// store closes: the entries it holds are appended.
	defer stopAudit(trail, logger)
	ao := app.Options{Logger: logger, Metrics: metrics, Audit: trail}
	if clock != nil {
		ao.SandboxClock = clock
	}
	a, err := app.New(cfg, store, ao)
	if err != nil {
		return err
	}
	if err := a.Listen(); err != nil {
		return errors.Join(err, a.Shutdown(context.Background()))
	}
	if err := q.Start(ctx); err != nil {
		return errors.Join(err, a.Shutdown(context.Background()))
	}
	caps := storage.CapabilitiesOf(store)
	ro := retention.Options{Retention: cfg.Webhooks.Retention, GC: caps.GC, GCEvery: cfg.Storage.GCInterval,
		Backup: caps.Backup, BackupDir: cfg.Storage.Backup.Dir, BackupEvery: cfg.Storage.Backup.Interval, BackupKeep: cfg.Storage.Backup.Keep,
		Version: version, OnBackup: metrics.ObserveBackup, Logger: logger, Now: now}
	if trail != nil {
		ro.AuditRetention, ro.PurgeAudit = cfg.Audit.Retention, trail.PurgeBefore
	}
	janitor := retention.New(store, ro)
	janitor.Start()
	defer janitor.Stop() // before the store closes (defers run last first)
	// Serve's goroutine is runServer's: every path out waits for it (stop).
	errc := make(chan error, 1)
	go func() { errc <- a.Serve() }()
	// stop shuts the App down and then the queue, each within
	// http.shutdown_timeout, and, unless it has, waits for Serve to return.
	stop := func(served bool) error {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
		defer cancel()
		err := a.Shutdown(sctx)
		qctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
		defer cancel()
		err = errors.Join(err, q.Stop(qctx))
		if !served {
			err = errors.Join(err, <-errc)
		}
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := a.Ready(rctx); err != nil {
		logger.Warn("not ready yet: token keys could not be loaded; /readyz will retry", "error", err)
	}
	cancel()
	if err := started(a, store); err != nil {
		return errors.Join(err, stop(false))
	}
	select {
	case err := <-errc:
		// A listener failed: no request is served any more; stop the
		// queue before the store closes.
		return errors.Join(err, stop(true))
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	return stop(false)
}
