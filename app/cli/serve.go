package cli

import (
	"context"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/storage"
)

// Serve runs rxgate in production: the partner and operator APIs, the
// webhook queue and the store's housekeeping, until ctx ends.
func Serve(ctx context.Context, env Env, args []string) error {
	f := newCommonFlags("serve", env.Stderr)
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	cfg, err := f.load()
	if err != nil {
		return err
	}
	if err := cfg.ValidateServe(); err != nil {
		return err
	}
	// Buffered: one write(2) per request was the access log's cost
	// (BenchmarkRead, make bench-read); see logbuffer.go.
	logger, logBuf := newBufferedLogger(cfg, env.Stderr)
	defer logBuf.Close()
	return runServer(ctx, cfg, env.Version, logger, nil, func(a *app.App, _ storage.Store) error {
		logger.Info("rxgate serving", "version", env.Version, "base_url", a.BaseURL(), "admin_url", a.AdminURL(), "partner_addr", a.PartnerAddr(), "admin_addr", a.AdminAddr())
		// Whoever waits for this line reads it now, not a tick later.
		logBuf.Flush()
		return nil
	})
}
