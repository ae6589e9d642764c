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
	logger := newLogger(cfg, env.Stderr)
	return runServer(ctx, cfg, env.Version, logger, nil, func(a *app.App, _ storage.Store) error {
		logger.Info("rxgate serving", "version", env.Version, "base_url", a.BaseURL(), "admin_url", a.AdminURL(), "partner_addr", a.PartnerAddr(), "admin_addr", a.AdminAddr())
		return nil
	})
}
