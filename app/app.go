// Package app is rxgate's HTTP layer: the partner API of the spec on one
// listener and the operator API on another, both answering in the spec's
// envelopes. It sees the store through storage.Store only; the webhook
// queue is the command wiring's (app/cli) to run.
package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/net/netutil"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/app/openapi"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
)

// Version is the build's version, set by main from -ldflags.
var Version = "dev"

// metaSigningKey names the built-in issuer's private key in the store.
const metaSigningKey = "signing-key"

// builtinJWKSURL is where the verifier reads the built-in issuer's keys:
// the partner handler answers it in-process (issuerTransport), so the
// server verifies its own tokens the way it verifies an external identity
// provider's, through a JWKS over HTTP, without needing a socket.
const builtinJWKSURL = "http://rxgate.builtin/.well-known/jwks.json"

// Options are the App's dependencies beyond its configuration.
type Options struct {
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Metrics are served at GET /metrics on the operator listener; nil
	// means a registry of the App's own.
	Metrics *Metrics
	// Audit records every request of the audited routes (audit.go); nil
	// audits nothing (audit.enabled off). The caller starts and stops it.
	Audit *AuditTrail
	// SandboxClock, set by rxgate sandbox only, is the clock POST
	// /admin/v1/sandbox/clock moves; it is the App's clock when Now is
	// nil.
	SandboxClock SandboxClock
}

// App serves the partner and operator APIs from one store. New builds it,
// Listen binds its two listeners, Serve answers on them until Shutdown.
type App struct {
	cfg      *config.Config
	store    storage.Store
	log      *slog.Logger
	now      func() time.Time
	verifier *auth.Verifier
	issuer   *auth.Issuer // nil when the built-in issuer is off
	metrics  *Metrics
	audit    *AuditTrail // nil when auditing is off
	console  *consoleSessions
	// changes is the store's change stamps, nil when it has none;
	// pageTags remembers first pages' tags by them (page_tags.go).
	changes  storage.ChangeStamper
	pageTags pageTags
	members  memberCache // member_cache.go
	// pages reads a prescription page with its request's member, nil
	// when the store cannot (member_page.go).
	pages storage.MemberPageReader
	// sandboxClock is the clock rxgate sandbox moves; nil in serve.
	sandboxClock SandboxClock
	// keyFailures limits wrong operator keys per client address; nil
	// when admin.key_failure_burst is 0.
	keyFailures *keyLimiter

	// partnerDoc is the partner document as this instance serves it,
	// rendered at its first use (the listeners are bound by then), for
	// /v1/openapi.json and /docs.
	partnerDoc func() ([]byte, error)

	errorsBase       string
	validationStatus int
	adminKeyHash     []byte

	partner, admin       *echo.Echo
	partnerSrv, adminSrv *http.Server

	// stopBackground ends the JWKS cache's refresh goroutines.
	stopBackground context.CancelFunc

	mu                 sync.Mutex
	partnerLn, adminLn net.Listener // nil until Listen
	serving            bool
	shutdown           bool
}

// New builds the App: both route tables, the built-in issuer (its key kept
// in the store) and the token verifier. It binds no socket; the only work
// it starts is the verifier's key refresh, which Shutdown stops.
func New(cfg *config.Config, store storage.Store, opts Options) (*App, error) {
	a := &App{
		cfg:              cfg,
		store:            store,
		changes:          storage.CapabilitiesOf(store).Changes,
		pages:            storage.CapabilitiesOf(store).Pages,
		log:              opts.Logger,
		now:              opts.Now,
		errorsBase:       strings.TrimRight(cfg.HTTP.ErrorsBase, "/"),
		validationStatus: http.StatusUnprocessableEntity,
		adminKeyHash:     storage.HashSecret(cfg.Admin.APIKey),
		metrics:          opts.Metrics,
		audit:            opts.Audit,
		sandboxClock:     opts.SandboxClock,
		console:          newConsoleSessions(),
		keyFailures:      newKeyLimiter(cfg.Admin.KeyFailureBurst, cfg.Admin.KeyFailureInterval),
	}
	if a.metrics == nil {
		a.metrics = NewMetrics()
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil && a.sandboxClock != nil {
		a.now = a.sandboxClock.Now
	}
	if a.now == nil {
		a.now = time.Now
	}
	if cfg.Auth.BuiltinIssuer {
		key, err := store.LoadOrCreateMeta(context.Background(), metaSigningKey, auth.GenerateKey)
		if err != nil {
			return nil, fmt.Errorf("app: signing key: %w", err)
		}
		if a.issuer, err = auth.NewIssuer(key, cfg.Auth.Issuer, cfg.Auth.Audience, a.now); err != nil {
			return nil, fmt.Errorf("app: signing key: %w", err)
		}
	}
	a.partnerDoc = sync.OnceValues(func() ([]byte, error) {
		base := a.BaseURL()
		return openapi.PartnerFor(base, partnerRoot(base, a.cfg.HTTP.BasePath), a.cfg.HTTP.MaxBulkDrugs)
	})
	a.partner = a.newEcho(apiPartner)
	a.admin = a.newEcho(apiAdmin)
	a.partnerRoutes(a.partner)
	a.adminRoutes(a.admin)
	a.partnerSrv = a.httpServer(a.partner)
	a.adminSrv = a.httpServer(a.admin)
	if err := a.setupVerifier(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *App) setupVerifier() error {
	vc := auth.VerifierConfig{
		JWKSURL:    a.cfg.Auth.JWKSURL,
		Issuer:     a.cfg.Auth.Issuer,
		Audience:   a.cfg.Auth.Audience,
		ScopeClaim: a.cfg.Auth.ScopeClaim,
		Leeway:     a.cfg.Auth.Leeway,
		MinRefresh: a.cfg.Auth.JWKSRefresh,
		Now:        a.now,
		Observe:    a.metrics.observeToken,
		Builtin:    a.issuer,
	}
	if a.issuer != nil && vc.JWKSURL == "" {
		vc.JWKSURL = builtinJWKSURL
		vc.HTTPClient = &http.Client{Transport: issuerTransport{a.partner}, Timeout: auth.DefaultHTTPTimeout}
	}
	ctx, cancel := context.WithCancel(context.Background())
	v, err := auth.NewVerifier(ctx, vc)
	if err != nil {
		cancel()
		return fmt.Errorf("app: auth: %w", err)
	}
	a.verifier, a.stopBackground = v, cancel
	return nil
}

// issuerTransport answers the verifier's requests for the built-in
// issuer's JWKS with the partner handler, in-process.
type issuerTransport struct{ h http.Handler }

func (t issuerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := &memResponse{header: make(http.Header)}
	t.h.ServeHTTP(w, r)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: r,
	}, nil
}

// memResponse is an http.ResponseWriter that keeps the answer in memory.
type memResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (m *memResponse) Header() http.Header { return m.header }

func (m *memResponse) WriteHeader(status int) {
	if m.status == 0 {
		m.status = status
	}
}

func (m *memResponse) Write(b []byte) (int, error) {
	m.WriteHeader(http.StatusOK)
	return m.body.Write(b)
}

// loopbackAddr turns a wildcard listen address into one the process can
// dial itself.
func loopbackAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// The api label of each listener's metrics.
const (
	apiPartner = "partner"
	apiAdmin   = "admin"
)

func (a *App) newEcho(api string) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = a.errorHandler
	// noStoreMiddleware comes before any middleware that can answer, so
	// that its headers are on every answer.
	chain := []echo.MiddlewareFunc{a.requestIDMiddleware, noStoreMiddleware(a.cacheRuleFor(api)), a.logMiddleware(api), a.recoverMiddleware, closeChunkedMiddleware, a.bodyLimitMiddleware}
	if api == apiPartner {
		// The partner listener adds no global middleware of its own
		// (partnerRoutes): its chain is composed once (composedChain).
		e.Use(composedChain(chain))
	} else {
		// adminRoutes adds its own after these.
		e.Use(chain...)
	}
	return e
}

// composedChain is chain composed once around the handler Echo's router
// picked for the request (c.Handler(): the route's, or the 404 or 405
// one), as one global middleware. Echo composes its global middleware
// anew on every request, a closure allocated per middleware per request
// (BenchmarkPrescriptionPage, alloc profile); the middleware functions
// only wrap next, so composing them once answers the same. It must be the
// last global middleware of its Echo: it ignores the next it is given,
// which is c.Handler() only when nothing follows it.
func composedChain(chain []echo.MiddlewareFunc) echo.MiddlewareFunc {
	h := func(c echo.Context) error { return c.Handler()(c) }
	for i := len(chain) - 1; i >= 0; i-- {
		h = chain[i](h)
	}
	return func(echo.HandlerFunc) echo.HandlerFunc { return h }
}

func (a *App) httpServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		MaxHeaderBytes:    a.cfg.HTTP.MaxHeaderBytes,
		ReadHeaderTimeout: a.cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       a.cfg.HTTP.ReadTimeout,
		WriteTimeout:      a.cfg.HTTP.WriteTimeout,
		IdleTimeout:       a.cfg.HTTP.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
}

// Listen binds the partner listener (http.listen) and the operator
// listener (admin.listen), each capped at http.max_connections. Their
// addresses are known when it returns.
func (a *App) Listen() error {
	pl, err := net.Listen("tcp", a.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("app: http.listen: %w", err)
	}
	al, err := net.Listen("tcp", a.cfg.Admin.Listen)
	if err != nil {
		_ = pl.Close()
		return fmt.Errorf("app: admin.listen: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.partnerLn != nil || a.shutdown {
		_, _ = pl.Close(), al.Close()
		return errors.New("app: listening already, or shut down")
	}
	// Each listener holds at most http.max_connections connections; more
	// wait in the kernel's accept queue until one closes.
	a.partnerLn = netutil.LimitListener(pl, a.cfg.HTTP.MaxConnections)
	a.adminLn = netutil.LimitListener(al, a.cfg.HTTP.MaxConnections)
	return nil
}

// listenAddr is the bound address of ln, or configured when not bound.
func (a *App) listenAddr(admin bool) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ln, configured := a.partnerLn, a.cfg.HTTP.Listen
	if admin {
		ln, configured = a.adminLn, a.cfg.Admin.Listen
	}
	if ln != nil {
		return loopbackAddr(ln.Addr().String())
	}
	return loopbackAddr(configured)
}

// BaseURL is the partner API's {base_url}: public_url when configured,
// otherwise derived from the partner listener's address.
func (a *App) BaseURL() string {
	if a.cfg.HTTP.PublicURL != "" {
		return strings.TrimRight(a.cfg.HTTP.PublicURL, "/")
	}
	return "http://" + a.listenAddr(false) + a.cfg.HTTP.BasePath
}

// PartnerAddr is the partner listener's address.
func (a *App) PartnerAddr() string { return a.listenAddr(false) }

// AdminURL is the operator API's root URL: admin.public_url when
// configured, otherwise derived from the operator listener's address.
func (a *App) AdminURL() string {
	if a.cfg.Admin.PublicURL != "" {
		return strings.TrimRight(a.cfg.Admin.PublicURL, "/")
	}
	return "http://" + a.listenAddr(true)
}

// AdminAddr is the operator listener's address.
func (a *App) AdminAddr() string { return a.listenAddr(true) }

// PartnerHandler is the partner API as an http.Handler (for in-process
// tests and benchmarks).
func (a *App) PartnerHandler() http.Handler { return a.partner }

// AdminHandler is the operator API as an http.Handler.
func (a *App) AdminHandler() http.Handler { return a.admin }

// Ready reports whether the store is open and the token keys are loaded.
// While they are not, it may start a JWKS fetch, through the verifier's
// limiter (auth.Verifier.Ready): an anonymous /readyz adds no fetches.
func (a *App) Ready(ctx context.Context) error {
	if err := a.store.Ping(ctx); err != nil {
		return err
	}
	return a.verifier.Ready(ctx)
}

// Issuer is the built-in token issuer, nil when it is off.
func (a *App) Issuer() *auth.Issuer { return a.issuer }

// Serve answers on the listeners Listen bound until Shutdown. It returns
// nil after a clean shutdown, also at once when Shutdown came first, as
// http.Server does; when one listener fails, it closes the other and
// returns the error.
func (a *App) Serve() error {
	a.mu.Lock()
	pl, al := a.partnerLn, a.adminLn
	switch {
	case a.shutdown:
		a.mu.Unlock()
		return nil
	case pl == nil:
		a.mu.Unlock()
		return errors.New("app: serve: Listen first")
	case a.serving:
		a.mu.Unlock()
		return errors.New("app: serve: serving already")
	}
	a.serving = true
	a.mu.Unlock()
	errc := make(chan error, 2)
	go func() { errc <- a.partnerSrv.Serve(pl) }()
	go func() { errc <- a.adminSrv.Serve(al) }()
	var first error
	for range 2 {
		if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) && first == nil {
			first = err
			_, _ = pl.Close(), al.Close()
		}
	}
	return first
}

// Shutdown stops accepting requests and waits, until ctx ends, for those in
// flight to finish, then stops the verifier's key refresh. It closes
// listeners that were bound but never served; it does not stop the queue or
// close the store, which are the command wiring's (app/cli).
func (a *App) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	a.shutdown = true
	serving, pl, al := a.serving, a.partnerLn, a.adminLn
	a.mu.Unlock()
	var err error
	if serving {
		err = errors.Join(a.partnerSrv.Shutdown(ctx), a.adminSrv.Shutdown(ctx))
	} else if pl != nil {
		_, _ = pl.Close(), al.Close()
	}
	a.stopBackground()
	return err
}

// QueueOptions are the webhook queue's options from cfg's webhooks section,
// with this build's user agent; the caller adds the logger and clock. The
// queue itself knows no configuration file.
func QueueOptions(cfg *config.Config) queue.Options {
	w := cfg.Webhooks
	return queue.Options{
		Workers: w.Workers, Timeout: w.Timeout, MaxAttempts: w.MaxAttempts, LeaseFor: w.Lease,
		BackoffBase: w.BackoffBase, BackoffMax: w.BackoffMax,
		CAFile: w.CAFile, AllowInsecureLoopback: w.AllowInsecureLoopback, AllowedNetworks: w.AllowedPrefixes(),
		UserAgent:    "rxgate/" + Version,
		DisableAfter: w.DisableAfter, OperatorURL: w.OperatorURL, OperatorSecret: w.OperatorSecret,
		// Replicas share a PostgreSQL store: the per-endpoint limit must
		// bound their attempts together.
		Shared: cfg.Storage.Driver == config.DriverPostgres,
	}
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
