// Package testsuite holds rxgate's importable test kits.
//
// This file and its siblings are the black-box HTTP kit: Start runs the
// real server in-process on free ports (or targets a running instance named
// by RXGATE_TEST_BASE_URL, RXGATE_TEST_ADMIN_URL and RXGATE_TEST_ADMIN_KEY),
// Env.Do and Env.Admin send requests, NewTenant builds fixtures through the
// operator API only, and RunScenarios runs declarative request/response
// scenarios whose envelope (spec sections 2.1 and 2.2) is always checked.
// The storage conformance suite lives in the storagetest subpackage; the
// fake clock and the fake external identity provider every test shares
// live in the fake subpackage.
//
// Only _test.go files import this package.
package testsuite

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
)

// Environment variables that point the kit at a running instance instead of
// an in-process server. The first three must all be set; the last is
// optional and defaults to config.Defaults().HTTP.ErrorsBase.
const (
	EnvBaseURL    = "RXGATE_TEST_BASE_URL"    // the instance's {base_url}, e.g. http://127.0.0.1:8080/external
	EnvAdminURL   = "RXGATE_TEST_ADMIN_URL"   // the operator API root, e.g. http://127.0.0.1:8081
	EnvAdminKey   = "RXGATE_TEST_ADMIN_KEY"   // the instance's admin.api_key
	EnvErrorsBase = "RXGATE_TEST_ERRORS_BASE" // the instance's http.errors_base, when not the default
)

// shutdownTimeout bounds the graceful stop of an in-process server.
const shutdownTimeout = 10 * time.Second

// Option adjusts the server Start runs.
type Option func(*options)

type options struct {
	builtinIssuer bool
	jwksURL       string
	configure     []func(*config.Config)
	now           func() time.Time
	// inProcess names the options given that only an in-process server can
	// honour; against a running instance Start skips when it is not empty.
	inProcess []string
	// postgresURL, when set, is the database of the in-process server.
	postgresURL string
	// sandboxClock, when set, is the server's clock, movable as rxgate
	// sandbox's is.
	sandboxClock *queue.OffsetClock
}

// WithBuiltinIssuer turns the built-in token issuer on (the default) or off.
// Off needs an external JWKS: combine it with WithJWKS.
func WithBuiltinIssuer(on bool) Option {
	return func(o *options) {
		o.builtinIssuer = on
		if !on {
			o.inProcess = append(o.inProcess, "WithBuiltinIssuer(false)")
		}
	}
}

// WithJWKS makes the server trust an external identity provider: the
// built-in issuer is off and auth.jwks_url is jwksURL (typically
// fake.IdP.URL).
func WithJWKS(jwksURL string) Option {
	return func(o *options) {
		o.builtinIssuer = false
		o.jwksURL = jwksURL
		o.inProcess = append(o.inProcess, "WithJWKS")
	}
}

// WithConfig edits the configuration after the kit's own settings (free
// ports, in-memory store, random admin key, issuer choice), before it is
// validated.
func WithConfig(fn func(*config.Config)) Option {
	return func(o *options) {
		o.configure = append(o.configure, fn)
		o.inProcess = append(o.inProcess, "WithConfig")
	}
}

// WithPostgres runs the in-process server on PostgreSQL at url (a
// connection URL whose search_path names the test's schema, as
// PostgresSchema returns), whatever EnvStore says.
func WithPostgres(url string) Option {
	return func(o *options) {
		o.postgresURL = url
		o.inProcess = append(o.inProcess, "WithPostgres")
	}
}

// WithNow gives the server (app and store) a clock, e.g. fake.Clock.Now.
func WithNow(now func() time.Time) Option {
	return func(o *options) {
		o.now = now
		o.inProcess = append(o.inProcess, "WithNow")
	}
}

// WithSandboxClock runs the server on c, as rxgate sandbox does: POST
// /admin/v1/sandbox/clock moves it forward.
func WithSandboxClock(c *queue.OffsetClock) Option {
	return func(o *options) {
		o.now = c.Now
		o.sandboxClock = c
		o.inProcess = append(o.inProcess, "WithSandboxClock")
	}
}

// Env is a running rxgate as the tests see it.
type Env struct {
	// BaseURL is the partner API's {base_url} (it ends in http.base_path).
	BaseURL string
	// PartnerURL is the root of the partner listener, where /healthz,
	// /readyz and /.well-known/jwks.json live.
	PartnerURL string
	// AdminURL is the root of the operator listener.
	AdminURL string
	// AdminKey is the operator API key.
	AdminKey string
	// ErrorsBase is http.errors_base: error.type is ErrorsBase + "/" + slug.
	ErrorsBase string
	// Issuer and Audience are the auth.issuer and auth.audience tokens must
	// carry.
	Issuer, Audience string

	// Config, App and Store are set only for an in-process server.
	Config *config.Config
	App    *app.App
	// Store is the server's store, for tests that change it below the
	// API (a damaged audit value, for one).
	Store storage.Backend

	inProcess bool
	client    *http.Client
	// contract checks every exchange against the OpenAPI documents
	// (openapi.go); Start sets it, Envs built by hand leave it off.
	contract bool
}

// externalTarget reads the variables naming a running instance; ok is false
// unless all three required ones are set.
func externalTarget() (base, admin, key string, ok bool) {
	base, admin, key = os.Getenv(EnvBaseURL), os.Getenv(EnvAdminURL), os.Getenv(EnvAdminKey)
	return base, admin, key, base != "" && admin != "" && key != ""
}

// Start returns a running rxgate. By default it starts the real server
// in-process: config.Defaults() with both listeners on 127.0.0.1:0, an
// in-memory store, a random admin key and the built-in issuer on, adjusted
// by opts; t.Cleanup shuts it down, waits for Serve to return and closes the
// store. When RXGATE_TEST_BASE_URL, RXGATE_TEST_ADMIN_URL and
// RXGATE_TEST_ADMIN_KEY are all set it targets that instance instead, and
// skips t when opts need an in-process server.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	o := options{builtinIssuer: true}
	for _, opt := range opts {
		opt(&o)
	}
	if base, admin, key, ok := externalTarget(); ok {
		if len(o.inProcess) > 0 {
			t.Skipf("testsuite: %s need an in-process server; unset %s, %s and %s to run this test",
				strings.Join(o.inProcess, ", "), EnvBaseURL, EnvAdminURL, EnvAdminKey)
		}
		return startExternal(t, base, admin, key)
	}
	return startInProcess(t, o)
}

func startExternal(t testing.TB, base, admin, key string) *Env {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err, "%s", EnvBaseURL)
	require.True(t, u.Scheme != "" && u.Host != "", "%s must be an absolute URL, got %q", EnvBaseURL, base)
	defaults := config.Defaults()
	errorsBase := os.Getenv(EnvErrorsBase)
	if errorsBase == "" {
		errorsBase = defaults.HTTP.ErrorsBase
	}
	client, transport := newClient()
	t.Cleanup(transport.CloseIdleConnections)
	return &Env{
		client:     client,
		contract:   true,
		BaseURL:    strings.TrimRight(base, "/"),
		PartnerURL: u.Scheme + "://" + u.Host,
		AdminURL:   strings.TrimRight(admin, "/"),
		AdminKey:   key,
		ErrorsBase: strings.TrimRight(errorsBase, "/"),
		Issuer:     defaults.Auth.Issuer,
		Audience:   defaults.Auth.Audience,
	}
}

func startInProcess(t testing.TB, o options) *Env {
	t.Helper()
	cfg := config.Defaults()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Admin.Listen = "127.0.0.1:0"
	cfg.Storage.InMemory = true
	cfg.Admin.APIKey = "test-" + storage.NewSecret()
	cfg.Auth.BuiltinIssuer = o.builtinIssuer
	cfg.Auth.JWKSURL = o.jwksURL
	for _, fn := range o.configure {
		fn(cfg)
	}
	require.NoError(t, cfg.Validate(), "testsuite: invalid configuration")

	// The server is wired as app/cli's runServer wires it: store, queue,
	// App; then the listeners, the queue's start and Serve. Cleanups run
	// last first.
	store := openBackend(t, o, cfg.Storage.MaxRecordBytes, cfg.Storage.InMemory, cfg.Storage.Dir)
	// Server-side warnings and errors (a 500's cause, for instance) appear
	// with the test's output when it fails or runs with -v.
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	now := o.now
	if now == nil {
		now = time.Now
	}
	metrics := app.NewMetrics()
	metrics.WatchStore(store, now)
	qo := app.QueueOptions(cfg)
	qo.Logger = logger
	qo.Observe = metrics.ObserveDelivery
	if o.now != nil {
		qo.Clock = queue.ClockFunc(o.now)
	}
	if o.sandboxClock != nil {
		qo.Clock = o.sandboxClock // Advance wakes what waits on it
		qo.SignatureNow = time.Now
	}
	q, err := queue.New(store, qo)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		assert.NoError(t, q.Stop(ctx), "testsuite: stopping the queue")
	})
	trail := startAudit(t, cfg, store, logger)
	ao := app.Options{Logger: logger, Now: o.now, Metrics: metrics, Audit: trail}
	if o.sandboxClock != nil {
		ao.SandboxClock = o.sandboxClock
	}
	a, err := app.New(cfg, store, ao)
	require.NoError(t, err)
	require.NoError(t, a.Listen())
	require.NoError(t, q.Start(t.Context()))
	served := make(chan error, 1)
	go func() { served <- a.Serve() }()
	client, transport := newClient()
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		assert.NoError(t, a.Shutdown(ctx), "testsuite: shutdown")
		select {
		case err := <-served:
			assert.NoError(t, err, "testsuite: Serve")
		case <-ctx.Done():
			t.Errorf("testsuite: Serve did not return within %s of Shutdown", shutdownTimeout)
		}
	})
	return &Env{
		client:     client,
		contract:   true,
		BaseURL:    a.BaseURL(),
		PartnerURL: "http://" + a.PartnerAddr(),
		AdminURL:   a.AdminURL(),
		AdminKey:   cfg.Admin.APIKey,
		ErrorsBase: strings.TrimRight(cfg.HTTP.ErrorsBase, "/"),
		Issuer:     cfg.Auth.Issuer,
		Audience:   cfg.Auth.Audience,
		Config:     cfg,
		App:        a,
		Store:      store,
		inProcess:  true,
	}
}

// InProcess reports whether the server runs in this process.
func (e *Env) InProcess() bool { return e.inProcess }

// RequireInProcess skips t when the Env targets a running instance: the
// test needs control only an in-process server gives (its config, clock or
// App).
func (e *Env) RequireInProcess(t testing.TB) {
	t.Helper()
	if !e.inProcess {
		t.Skipf("testsuite: this test needs an in-process server; unset %s, %s and %s to run it",
			EnvBaseURL, EnvAdminURL, EnvAdminKey)
	}
}

// RequireBuiltinIssuer skips t when the server has no built-in token issuer
// (its /.well-known/jwks.json is not served).
func (e *Env) RequireBuiltinIssuer(t testing.TB) {
	t.Helper()
	if e.inProcess {
		if !e.Config.Auth.BuiltinIssuer {
			t.Skip("testsuite: this test needs auth.builtin_issuer on")
		}
		return
	}
	r := e.Do(t, Request{URL: e.PartnerURL + "/.well-known/jwks.json"})
	if r.Status == 404 {
		t.Skip("testsuite: the instance under test has auth.builtin_issuer off")
	}
}

// URL resolves a path against BaseURL; absolute URLs are returned as is.
func (e *Env) URL(path string) string {
	if strings.HasPrefix(path, "http://") || strings.HasPrefix(path, "https://") {
		return path
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return e.BaseURL + path
}

// AdminPath is the absolute URL of an operator API path.
func (e *Env) AdminPath(path string) string {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return e.AdminURL + path
}

// ErrorType is the error.type the server answers for slug.
func (e *Env) ErrorType(slug string) string {
	return fmt.Sprintf("%s/%s", e.ErrorsBase, slug)
}

// startAudit starts the audit trail as app/cli's runServer does when
// audit.enabled is on (the default), signing with audit.key_file's key
// or, without one, a key of the test's own; nil when it is off. Its
// cleanup, registered before the App's, appends what it holds after the
// App has shut down and before the store closes.
func startAudit(t testing.TB, cfg *config.Config, store storage.Store, logger *slog.Logger) *app.AuditTrail {
	t.Helper()
	if !cfg.Audit.Enabled {
		return nil
	}
	log, ok := store.(storage.AuditLog)
	require.True(t, ok, "testsuite: audit.enabled: this store keeps no audit trail")
	var key ed25519.PrivateKey
	if cfg.Audit.KeyFile != "" {
		seed, err := config.ReadKeyFile("audit.key_file", cfg.Audit.KeyFile)
		require.NoError(t, err)
		key = ed25519.NewKeyFromSeed(seed)
	} else {
		_, k, err := ed25519.GenerateKey(nil)
		require.NoError(t, err)
		key = k
	}
	trail := app.NewAuditTrail(log, app.AuditOptions{
		Key: key, CheckpointEvery: cfg.Audit.CheckpointEvery, CheckpointInterval: cfg.Audit.CheckpointInterval, Logger: logger,
	})
	trail.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		assert.NoError(t, trail.Stop(ctx), "testsuite: stopping the audit trail")
	})
	return trail
}
