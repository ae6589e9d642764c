// Package app is rxgate's HTTP layer: the partner API of the spec on one
// listener and the operator API on another, both answering in the spec's
// envelopes.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
)

// Version is the build's version, set by main from -ldflags.
var Version = "dev"

// metaSigningKey names the built-in issuer's private key in the store.
const metaSigningKey = "signing-key"

// Options are the App's dependencies beyond its configuration.
type Options struct {
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// App serves the partner and operator APIs from one store.
type App struct {
	cfg      *config.Config
	store    *storage.Store
	log      *slog.Logger
	now      func() time.Time
	verifier *auth.Verifier
	issuer   *auth.Issuer // nil when the built-in issuer is off
	// queue delivers webhooks: Serve starts it, Shutdown stops it after
	// the HTTP servers and before the caller closes the store.
	queue *queue.Queue

	errorsBase       string
	validationStatus int
	adminKeyHash     []byte

	partner, admin       *echo.Echo
	partnerLn, adminLn   net.Listener
	partnerSrv, adminSrv *http.Server

	// stopBackground ends the JWKS cache's refresh goroutines.
	stopBackground context.CancelFunc

	mu       sync.Mutex
	shutdown bool
}

// New binds both listeners and prepares the App; Serve starts answering.
// The listeners are bound here so that their addresses (and with the
// built-in issuer, the JWKS URL) are known before serving.
func New(cfg *config.Config, store *storage.Store, opts Options) (*App, error) {
	a := &App{
		cfg:              cfg,
		store:            store,
		log:              opts.Logger,
		now:              opts.Now,
		errorsBase:       strings.TrimRight(cfg.HTTP.ErrorsBase, "/"),
		validationStatus: http.StatusUnprocessableEntity,
		adminKeyHash:     storage.HashSecret(cfg.Admin.APIKey),
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	var err error
	if a.partnerLn, err = net.Listen("tcp", cfg.HTTP.Listen); err != nil {
		return nil, fmt.Errorf("app: http.listen: %w", err)
	}
	if a.adminLn, err = net.Listen("tcp", cfg.Admin.Listen); err != nil {
		_ = a.partnerLn.Close()
		return nil, fmt.Errorf("app: admin.listen: %w", err)
	}
	if err := a.setupAuth(); err != nil {
		a.closeListeners()
		return nil, err
	}
	if a.queue, err = queue.New(queue.Options{
		Store: store, Config: cfg.Webhooks, Logger: a.log, Clock: queue.ClockFunc(a.now), UserAgent: "rxgate/" + Version,
	}); err != nil {
		a.stopBackground()
		a.closeListeners()
		return nil, fmt.Errorf("app: %w", err)
	}
	a.partner = a.newEcho()
	a.admin = a.newEcho()
	a.partnerRoutes(a.partner)
	a.adminRoutes(a.admin)
	a.partnerSrv = a.httpServer(a.partner)
	a.adminSrv = a.httpServer(a.admin)
	return a, nil
}

func (a *App) setupAuth() error {
	jwksURL := a.cfg.Auth.JWKSURL
	if a.cfg.Auth.BuiltinIssuer {
		key, err := a.store.LoadOrCreateMeta(context.Background(), metaSigningKey, auth.GenerateKey)
		if err != nil {
			return fmt.Errorf("app: signing key: %w", err)
		}
		if a.issuer, err = auth.NewIssuer(key, a.cfg.Auth.Issuer, a.cfg.Auth.Audience, a.now); err != nil {
			return fmt.Errorf("app: signing key: %w", err)
		}
		if jwksURL == "" {
			// The server verifies its own tokens the way it verifies an
			// external identity provider's: through the JWKS over HTTP.
			jwksURL = "http://" + loopbackAddr(a.partnerLn.Addr()) + "/.well-known/jwks.json"
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopBackground = cancel
	v, err := auth.NewVerifier(ctx, auth.VerifierConfig{
		JWKSURL:    jwksURL,
		Issuer:     a.cfg.Auth.Issuer,
		Audience:   a.cfg.Auth.Audience,
		ScopeClaim: a.cfg.Auth.ScopeClaim,
		Leeway:     a.cfg.Auth.Leeway,
		MinRefresh: a.cfg.Auth.JWKSRefresh,
		Now:        a.now,
	})
	if err != nil {
		cancel()
		return fmt.Errorf("app: auth: %w", err)
	}
	a.verifier = v
	return nil
}

// loopbackAddr turns a wildcard listen address into one the process can
// dial itself.
func loopbackAddr(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func (a *App) newEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = a.errorHandler
	e.Use(a.requestIDMiddleware, a.logMiddleware, a.recoverMiddleware, a.bodyLimitMiddleware)
	return e
}

func (a *App) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       a.cfg.HTTP.ReadTimeout,
		WriteTimeout:      a.cfg.HTTP.WriteTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
}

// BaseURL is the partner API's {base_url}: public_url when configured,
// otherwise derived from the bound listener.
func (a *App) BaseURL() string {
	if a.cfg.HTTP.PublicURL != "" {
		return strings.TrimRight(a.cfg.HTTP.PublicURL, "/")
	}
	return "http://" + loopbackAddr(a.partnerLn.Addr()) + a.cfg.HTTP.BasePath
}

// PartnerAddr is the partner listener's bound address.
func (a *App) PartnerAddr() string { return loopbackAddr(a.partnerLn.Addr()) }

// AdminURL is the operator API's root URL.
func (a *App) AdminURL() string { return "http://" + loopbackAddr(a.adminLn.Addr()) }

// PartnerHandler is the partner API as an http.Handler (for in-process
// tests and benchmarks).
func (a *App) PartnerHandler() http.Handler { return a.partner }

// AdminHandler is the operator API as an http.Handler.
func (a *App) AdminHandler() http.Handler { return a.admin }

// Ready reports whether the store is open and the token keys are loaded,
// fetching the JWKS if it has not been yet.
func (a *App) Ready(ctx context.Context) error {
	if err := a.store.Ping(ctx); err != nil {
		return err
	}
	return a.verifier.Ready(ctx)
}

// Issuer is the built-in token issuer, nil when it is off.
func (a *App) Issuer() *auth.Issuer { return a.issuer }

// Serve answers on both listeners until Shutdown. It returns nil after a
// clean shutdown.
func (a *App) Serve() error {
	if err := a.queue.Start(context.Background()); err != nil {
		a.closeListeners()
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- a.partnerSrv.Serve(a.partnerLn) }()
	go func() { errc <- a.adminSrv.Serve(a.adminLn) }()
	var first error
	for range 2 {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
			a.closeListeners()
		}
	}
	if first != nil {
		// No Shutdown follows a failed Serve: stop the queue here, before
		// the caller closes the store.
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.HTTP.ShutdownTimeout)
		defer cancel()
		_ = a.queue.Stop(ctx)
	}
	return first
}

// Shutdown stops accepting requests and waits, until ctx ends, for those in
// flight to finish; then it stops the webhook queue (queue.Stop). It does
// not close the store.
func (a *App) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	a.shutdown = true
	a.mu.Unlock()
	err := errors.Join(a.partnerSrv.Shutdown(ctx), a.adminSrv.Shutdown(ctx))
	// Then the queue: in-flight deliveries finish (or, when ctx ends,
	// return to pending) before the caller closes the store.
	err = errors.Join(err, a.queue.Stop(ctx))
	a.stopBackground()
	return err
}

func (a *App) closeListeners() {
	_ = a.partnerLn.Close()
	_ = a.adminLn.Close()
}

// healthz answers 200 while the process runs.
func (a *App) healthz(c echo.Context) error {
	return a.ok(c, "ok", map[string]string{"status": "ok", "version": Version})
}

// readyz answers 200 when the store is open and the token keys are loaded.
func (a *App) readyz(c echo.Context) error {
	a.mu.Lock()
	down := a.shutdown
	a.mu.Unlock()
	if down {
		return echoErrors[http.StatusServiceUnavailable].withCause(errors.New("shutting down"))
	}
	if err := a.Ready(c.Request().Context()); err != nil {
		return echoErrors[http.StatusServiceUnavailable].withCause(err)
	}
	return a.ok(c, "ready", map[string]string{"status": "ready"})
}
