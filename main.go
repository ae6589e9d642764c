// Command rxgate is a self-hosted implementation of the e-prescribing
// partner interface: `rxgate serve` runs it in production, `rxgate sandbox`
// runs a throwaway instance with demo data, `rxgate token` mints a token
// through the operator API, `rxgate listen` receives and verifies webhooks
// locally, and `rxgate version` prints the version.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/backup"
	"github.com/rxgate/rxgate/storage/badger"
	"github.com/rxgate/rxgate/storage/postgres"
	"github.com/rxgate/rxgate/storage/retention"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: rxgate <command> [flags]

commands:
  serve     run the partner and operator APIs (needs --config or RXGATE_ settings)
  sandbox   run a throwaway instance with demo data and print how to use it
  token     mint a partner token through the operator API
  listen    receive webhooks on 127.0.0.1, verify each signature and print the event
  backup    download a consistent backup from a running server (--out FILE)
  restore   load a backup into an empty data directory (--in FILE --data-dir DIR)
  keygen    write a new encryption key file (--out FILE, mode 600)
  rotate-key  re-key a stopped encrypted store (--data-dir, --old-key-file, --new-key-file)
  migrate   bring the configured store's schema up to this version without serving
  migrate-store  copy a stopped Badger store into an empty PostgreSQL database (--from-data-dir DIR --to-url URL)
  version   print the version
`

// run is main without the process: it returns the exit code, so tests can
// drive every command in-process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app.Version = version
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = serve(ctx, args[1:], stderr)
	case "sandbox":
		err = sandbox(ctx, args[1:], stdout, stderr)
	case "token":
		err = token(ctx, args[1:], stdout)
	case "listen":
		err = listen(ctx, args[1:], stdout, stderr)
	case "backup":
		err = backupCmd(ctx, args[1:], stdout, stderr)
	case "restore":
		err = restoreCmd(args[1:], stdout, stderr)
	case "keygen":
		err = keygen(args[1:], stderr)
	case "rotate-key":
		err = rotateKey(args[1:], stdout, stderr)
	case "migrate":
		err = migrateCmd(ctx, args[1:], stdout, stderr)
	case "migrate-store":
		err = migrateStoreCmd(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "rxgate", version)
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "rxgate: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "rxgate:", err)
		return 1
	}
	return 0
}

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
	f := &commonFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.StringVar(&f.configPath, "config", "", "YAML config file")
	f.fs.StringVar(&f.listen, "listen", "", "partner API address (http.listen)")
	f.fs.StringVar(&f.adminListen, "admin-listen", "", "operator API address (admin.listen)")
	f.fs.StringVar(&f.dataDir, "data-dir", "", "data directory (storage.dir)")
	return f
}

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

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// serve runs rxgate in production.
func serve(ctx context.Context, args []string, stderr io.Writer) error {
	f := newCommonFlags("serve", stderr)
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
	logger := newLogger(cfg, stderr)
	return runServer(ctx, cfg, logger, func(a *app.App) error {
		logger.Info("rxgate serving", "version", version, "base_url", a.BaseURL(), "admin_url", a.AdminURL(), "partner_addr", a.PartnerAddr(), "admin_addr", a.AdminAddr())
		return nil
	})
}

// runServer wires the server: it opens the store, builds the webhook queue
// and the App on it, binds the listeners, starts the queue, serves, calls
// started, and serves until ctx ends. Then it stops in order: the HTTP
// listeners drain, the queue finishes or returns its in-flight deliveries,
// and the store closes last.
func runServer(ctx context.Context, cfg *config.Config, logger *slog.Logger, started func(*app.App) error) error {
	tuneProcs(cfg, os.Getenv("GOMAXPROCS") != "")
	store, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := store.Close(); err != nil {
			logger.Error("closing the store failed", "error", err)
		}
	}()
	metrics := app.NewMetrics()
	metrics.WatchStore(store, time.Now)
	qo := app.QueueOptions(cfg)
	qo.Logger = logger
	qo.Observe = metrics.ObserveDelivery
	q, err := queue.New(store, qo)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	a, err := app.New(cfg, store, app.Options{Logger: logger, Metrics: metrics})
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
	janitor := retention.New(store, retention.Options{Retention: cfg.Webhooks.Retention, GC: caps.GC, GCEvery: cfg.Storage.GCInterval,
		Backup: caps.Backup, BackupDir: cfg.Storage.Backup.Dir, BackupEvery: cfg.Storage.Backup.Interval, BackupKeep: cfg.Storage.Backup.Keep,
		Version: version, OnBackup: metrics.ObserveBackup, Logger: logger})
	janitor.Start()
	defer janitor.Stop() // before the store closes (defers run last first)
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
	if err := started(a); err != nil {
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

// syncProcs is how many processors (Go's Ps) rxgate adds to Go's default
// (one per CPU it may use) when it serves from Badger on disk. Go hands a
// goroutine's P to another only some time after the goroutine has entered
// a system call; Badger's writer spends most of its time in the disk's
// syncs, so on a small machine one of the two Ps was often held by a
// goroutine waiting for the disk while runnable goroutines waited for a P.
// With two more, durable creates at concurrency 8 ran 7 to 15% faster on
// the 2-core machine of the README's performance section (GOMAXPROCS 3: 3%,
// 6 and 8: no better than 4). A PostgreSQL store waits on the network,
// which does not hold a P.
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

// openStore opens the configured store, migrating its schema or format
// to this version. A PostgreSQL store is waited for up to
// storage.postgres.connect_timeout.
func openStore(ctx context.Context, cfg *config.Config, logger *slog.Logger) (storage.Backend, error) {
	if cfg.Storage.Driver == config.DriverPostgres {
		pg := cfg.Storage.Postgres
		return postgres.Open(ctx, postgres.Options{
			URL: pg.URL, MaxConns: int32(pg.MaxConns), ConnectTimeout: pg.ConnectTimeout, Logger: logger,
			MaxRecordBytes: cfg.Storage.MaxRecordBytes,
		})
	}
	var key []byte
	if f := cfg.Storage.EncryptionKeyFile; f != "" {
		var err error
		if key, err = config.ReadKeyFile("storage.encryption_key_file", f); err != nil {
			return nil, err
		}
	}
	return badger.Open(badger.Options{Dir: cfg.Storage.Dir, InMemory: cfg.Storage.InMemory, MaxRecordBytes: cfg.Storage.MaxRecordBytes, EncryptionKey: key, Logger: logger})
}

// keygen writes a new encryption key (base64 of 32 random bytes) to a new
// file readable by its owner only.
func keygen(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "the key file to create (it must not exist)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("keygen: --out FILE is required")
	}
	key := make([]byte, config.KeyBytes)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("keygen: %w", err)
	}
	if _, err := fmt.Fprintln(f, base64.StdEncoding.EncodeToString(key)); err != nil {
		_ = f.Close()
		_ = os.Remove(*out)
		return fmt.Errorf("keygen: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = os.Remove(*out)
		return fmt.Errorf("keygen: %w", err)
	}
	return f.Close()
}

// rotateKey re-keys a stopped encrypted store: afterwards only the new key
// opens it.
func rotateKey(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rotate-key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "", "the store's data directory (the server must be stopped)")
	oldFile := fs.String("old-key-file", "", "the file holding the store's current key")
	newFile := fs.String("new-key-file", "", "the file holding the new key (rxgate keygen)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *oldFile == "" || *newFile == "" {
		return errors.New("rotate-key: --data-dir, --old-key-file and --new-key-file are required")
	}
	oldKey, err := config.ReadKeyFile("--old-key-file", *oldFile)
	if err != nil {
		return err
	}
	newKey, err := config.ReadKeyFile("--new-key-file", *newFile)
	if err != nil {
		return err
	}
	if err := badger.RotateKey(*dir, oldKey, newKey); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "the store in %s is now encrypted with the key in %s; set storage.encryption_key_file to it\n", *dir, *newFile)
	return nil
}

// sandbox runs a throwaway instance: in memory unless --data-dir is given,
// built-in issuer on, demo data seeded, and everything needed to use it
// printed.
func sandbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newCommonFlags("sandbox", stderr)
	printJSON := f.fs.String("print-json", "", "also write the printed facts as JSON to this file")
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	cfg, err := f.load()
	if err != nil {
		return err
	}
	cfg.Auth.BuiltinIssuer = true
	cfg.Storage.InMemory = cfg.Storage.Dir == ""
	cfg.Webhooks.AllowInsecureLoopback = true
	if cfg.Admin.APIKey == "" {
		cfg.Admin.APIKey = "sandbox-" + storage.NewSecret()
	}
	if cfg.Log.Format == "json" {
		cfg.Log.Format = "text"
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger := newLogger(cfg, stderr)
	return runServer(ctx, cfg, logger, func(a *app.App) error {
		facts, err := a.SeedSandbox(ctx)
		if err != nil {
			return err
		}
		if *printJSON != "" {
			b, err := json.MarshalIndent(facts, "", "  ")
			if err != nil {
				return err
			}
			if err := os.WriteFile(*printJSON, append(b, '\n'), 0o600); err != nil {
				return err
			}
		}
		printFacts(stdout, facts)
		return nil
	})
}

func printFacts(w io.Writer, f *app.SandboxFacts) {
	var b strings.Builder
	fmt.Fprintf(&b, "rxgate sandbox %s is running. Press Ctrl-C to stop.\n\n", version)
	fmt.Fprintf(&b, "  base URL             %s\n", f.BaseURL)
	fmt.Fprintf(&b, "  API reference        %s/docs\n", f.BaseURL)
	fmt.Fprintf(&b, "  web console          %s\n", f.ConsoleSignInURL)
	fmt.Fprintf(&b, "                       (signs you in once; then %s/console/ with the operator API key)\n", f.AdminURL)
	fmt.Fprintf(&b, "  operator URL         %s\n", f.AdminURL)
	fmt.Fprintf(&b, "  operator API key     %s\n", f.AdminAPIKey)
	fmt.Fprintf(&b, "  partner id           %s\n", f.PartnerID)
	fmt.Fprintf(&b, "  partner secret       %s\n", f.PartnerSecret)
	fmt.Fprintf(&b, "  organization id      %s\n", f.OrganizationID)
	fmt.Fprintf(&b, "  organization secret  %s\n", f.OrganizationSecret)
	fmt.Fprintf(&b, "\nPatients, each of user %s (try the patient update on any of them):\n\n", f.RxUserID)
	for _, p := range f.Patients {
		fmt.Fprintf(&b, "  %s  %-22s %2d prescriptions\n", p.PatientID, p.Name, p.Prescriptions)
	}
	fmt.Fprintln(&b)
	fmt.Fprintf(&b, "Users, each with a token carrying every partner scope (valid until %s):\n", f.TokenExpiresAt.Format(time.RFC3339))
	for _, u := range f.Users {
		fmt.Fprintf(&b, "\n  %-10s %s  %s <%s>\n  %s\n", u.Role, u.UserID, u.Name, u.Email, u.Token)
	}
	fmt.Fprintf(&b, "\nTry these (each works pasted alone):\n")
	for _, c := range f.Curl {
		fmt.Fprintf(&b, "\n# %s\n%s\n", c.Title, c.Command)
	}
	fmt.Fprintf(&b, "\nWebhooks: receive prescription.created on this machine with rxgate listen.\n")
	fmt.Fprintf(&b, "1. Run the register command above; the answer shows the endpoint's secret once.\n")
	fmt.Fprintf(&b, "2. Start the receiver with that secret (go run . listen ... from the source tree):\n")
	fmt.Fprintf(&b, "   rxgate listen --port 9000 --secret <secret from step 1>\n")
	fmt.Fprintf(&b, "3. Run the validate command above (nothing is sent for an organization before it), then the\n")
	fmt.Fprintf(&b, "   create-prescription command, or replay an event (GET /admin/v1/events lists them;\n")
	fmt.Fprintf(&b, "   POST /admin/v1/events/{event_id}/replay). Each delivery is verified and printed by the receiver.\n")
	fmt.Fprint(w, b.String())
}

// token mints a token through the operator API and prints it.
func token(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML config file (for admin.listen and admin.api_key)")
	adminURL := fs.String("admin-url", "", "operator API URL (default: http://{admin.listen})")
	org := fs.String("organization", "", "organization id")
	user := fs.String("user", "", "user id")
	ttl := fs.Duration("ttl", time.Hour, "token lifetime")
	var scopes multiFlag
	fs.Var(&scopes, "scope", "scope to grant (repeatable; default: every scope the organization allows)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *org == "" || *user == "" {
		return errors.New("token: --organization and --user are required")
	}
	base, key, err := operatorTarget("token", *configPath, *adminURL)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{
		"organization_id": *org, "user_id": *user, "scopes": []string(scopes), "ttl_seconds": int(ttl.Seconds()),
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/admin/v1/tokens", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 15 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			AccessToken string `json:"access_token"`
		} `json:"data"`
		Error struct {
			Detail     string `json:"detail"`
			Validation []struct {
				Field, Message string
			} `json:"validation"`
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return fmt.Errorf("token: reading the answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := out.Error.Detail
		for _, v := range out.Error.Validation {
			msg += "; " + v.Field + " " + v.Message
		}
		return fmt.Errorf("token: HTTP %d: %s", resp.StatusCode, msg)
	}
	fmt.Fprintln(stdout, out.Data.AccessToken)
	return nil
}

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, " ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// listen runs a local webhook receiver on 127.0.0.1 that accepts
// deliveries at /, verifies each signature with the secrets given
// (several during a rotation), answers 200 or 400 (spec 6.4.4) and prints
// the event.
func listen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("listen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 9000, "port on 127.0.0.1 (0 picks a free one)")
	var secrets multiFlag
	fs.Var(&secrets, "secret", "webhook secret shown when the endpoint was registered or rotated (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(secrets) == 0 {
		return errors.New("listen: --secret is required (the secret shown when the endpoint was registered)")
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("listen: --port must be from 0 to 65535, got %d", *port)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var mu sync.Mutex
	rcv := &receiver.Receiver{Secrets: secrets, NoRecord: true, OnDelivery: func(d receiver.Delivery) {
		mu.Lock()
		defer mu.Unlock()
		printDelivery(stdout, d)
	}}
	mux := http.NewServeMux()
	mux.Handle("/{$}", rcv)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/"
	mu.Lock()
	fmt.Fprintf(stdout, "rxgate listen: receiving webhooks at %s (verifying with %d secret(s)). Ctrl-C stops it.\n", url, len(secrets))
	fmt.Fprintf(stdout, "Point an endpoint at it (webhooks.allow_insecure_loopback must be on, as in the sandbox):\n")
	fmt.Fprintf(stdout, "  POST /admin/v1/webhook-endpoints {\"partner_id\": \"<partner id>\", \"url\": %q}\n\n", url)
	mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("listen: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-errc
	return err
}

// printDelivery writes one delivery: a summary line, then the body.
func printDelivery(w io.Writer, d receiver.Delivery) {
	var ev struct {
		EventType string `json:"event_type"`
	}
	_ = json.Unmarshal(d.Body, &ev)
	verdict := "signature ok"
	if d.Err != nil {
		verdict = "rejected: " + d.Err.Error()
	}
	fmt.Fprintf(w, "%s  %d  %s  event_id=%s  %s\n", d.ReceivedAt.UTC().Format(time.RFC3339), d.Status, ev.EventType, d.EventID, verdict)
	var pretty bytes.Buffer
	if json.Indent(&pretty, d.Body, "  ", "  ") == nil {
		fmt.Fprintf(w, "  %s\n\n", pretty.String())
		return
	}
	fmt.Fprintf(w, "  %q\n\n", d.Body)
}

// backupCmd downloads a backup through the operator API (GET
// /admin/v1/backup), reading admin.listen and the key as token does, into
// a temporary file beside FILE that is renamed to FILE only once it is
// whole and verified.
func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "YAML config file (for admin.listen and admin.api_key)")
	adminURL := fs.String("admin-url", "", "operator API URL (default: http://{admin.listen})")
	out := fs.String("out", "", "the backup file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("backup: --out FILE is required")
	}
	base, key, err := operatorTarget("backup", *configPath, *adminURL)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/admin/v1/backup", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("backup: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	dir, name := filepath.Split(*out)
	if dir == "" {
		dir = "."
	}
	h, err := backup.WriteFile(dir, name, func(f *os.File) error {
		if _, err := io.Copy(f, resp.Body); err != nil {
			return fmt.Errorf("downloading: %w", err)
		}
		return nil
	})
	switch {
	case errors.Is(err, backup.ErrInvalid):
		return fmt.Errorf("backup: the download is not a whole backup: %w", err)
	case err != nil:
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "backup written to %s: %d entries, encrypted: %t, sha256 %s\n", *out, h.Entries, h.Encrypted, h.SHA256)
	return nil
}

// restoreCmd loads a backup into an empty (or absent) data directory,
// offline. An encrypted backup needs the store's key: storage.
// encryption_key_file from --config or the environment, or
// --encryption-key-file.
func restoreCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "YAML config file (for storage.encryption_key_file)")
	in := fs.String("in", "", "the backup file")
	dir := fs.String("data-dir", "", "the data directory to create (empty or absent)")
	keyFile := fs.String("encryption-key-file", "", "the key of an encrypted backup's store (default: storage.encryption_key_file)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" || *dir == "" {
		return errors.New("restore: --in FILE and --data-dir DIR are required")
	}
	name := "--encryption-key-file"
	if *keyFile == "" {
		cfg, err := config.Load(config.Options{Path: *configPath, Environ: os.Environ()})
		if err != nil {
			return err
		}
		*keyFile, name = cfg.Storage.EncryptionKeyFile, "storage.encryption_key_file"
	}
	var key []byte
	if *keyFile != "" {
		var err error
		if key, err = config.ReadKeyFile(name, *keyFile); err != nil {
			return err
		}
	}
	h, err := badger.Restore(*in, *dir, key)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "restored %d entries into %s (backup of %s by rxgate %s); start it with rxgate serve\n",
		h.Entries, *dir, h.CreatedAt.Format(time.RFC3339), h.RxgateVersion)
	return nil
}

// operatorTarget is where a command reaches the operator API and the key
// it sends: admin.listen (or adminURL) and admin.api_key (or its file),
// from configPath and the environment.
func operatorTarget(cmd, configPath, adminURL string) (base, key string, err error) {
	cfg, err := config.Load(config.Options{Path: configPath, Environ: os.Environ()})
	if err != nil {
		return "", "", err
	}
	if cfg.Admin.APIKey == "" {
		return "", "", fmt.Errorf("%s: admin.api_key is not set (use --config, RXGATE_ADMIN__API_KEY or RXGATE_ADMIN__API_KEY_FILE)", cmd)
	}
	base = adminURL
	if base == "" {
		base = "http://" + cfg.Admin.Listen
	}
	return strings.TrimRight(base, "/"), cfg.Admin.APIKey, nil
}

// migrateCmd opens the configured store, which applies its migrations, and
// closes it: for deployments that migrate before they roll out replicas.
// Replicas that start together also migrate safely (under a lock).
func migrateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "YAML config file (storage section)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(config.Options{Path: *configPath, Environ: os.Environ()})
	if err != nil {
		return err
	}
	store, err := openStore(ctx, cfg, newLogger(cfg, stderr))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := store.Close(); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if cfg.Storage.Driver == config.DriverPostgres {
		fmt.Fprintf(stdout, "rxgate %s: the PostgreSQL schema is at version %d\n", version, postgres.SchemaVersion())
	} else {
		fmt.Fprintf(stdout, "rxgate %s: the store in %s is at this version's format\n", version, cfg.Storage.Dir)
	}
	return nil
}

// migrateStoreCmd copies a stopped Badger store into an empty PostgreSQL
// database: everything, with its ids, secret hashes, cursor and signing
// keys (so cursors and tokens issued before stay valid) and pending
// deliveries; in one transaction, so a failed copy leaves the database
// empty. The Badger directory keeps its data (opening it applies any
// format upgrade this version has, as serve would).
func migrateStoreCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate-store", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from-data-dir", "", "the Badger data directory (the server using it must be stopped)")
	keyFile := fs.String("encryption-key-file", "", "the key of an encrypted store")
	to := fs.String("to-url", "", "the PostgreSQL connection URL (default: RXGATE_STORAGE__POSTGRES__URL; prefer --to-url-file or the variable, which keep a password out of the shell's history)")
	toFile := fs.String("to-url-file", "", "a file holding the connection URL")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *toFile != "" {
		if *to != "" {
			return errors.New("migrate-store: set --to-url or --to-url-file, not both")
		}
		b, err := os.ReadFile(*toFile)
		if err != nil {
			return fmt.Errorf("migrate-store: --to-url-file: %w", err)
		}
		*to = strings.TrimRight(string(b), "\r\n")
	}
	if *to == "" {
		*to = os.Getenv("RXGATE_STORAGE__POSTGRES__URL")
	}
	if *from == "" || *to == "" {
		return errors.New("migrate-store: --from-data-dir DIR and --to-url URL (or --to-url-file FILE) are required")
	}
	// Badger would make an empty store of a mistyped directory: the source
	// must be a store already.
	if _, err := os.Stat(filepath.Join(*from, "MANIFEST")); err != nil {
		return fmt.Errorf("migrate-store: %s holds no rxgate store (no Badger MANIFEST)", *from)
	}
	var key []byte
	if *keyFile != "" {
		var err error
		if key, err = config.ReadKeyFile("--encryption-key-file", *keyFile); err != nil {
			return err
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, err := badger.Open(badger.Options{Dir: *from, EncryptionKey: key, Logger: logger})
	if err != nil {
		return fmt.Errorf("migrate-store: %w", err)
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, postgres.Options{URL: *to, MaxConns: 4, ConnectTimeout: 30 * time.Second, Logger: logger})
	if err != nil {
		return fmt.Errorf("migrate-store: %w", err)
	}
	defer dst.Close()
	n, err := dst.Import(ctx, src.Export(ctx))
	if err != nil {
		return fmt.Errorf("migrate-store: %w", err)
	}
	fmt.Fprintf(stdout, "copied %d records from %s into PostgreSQL; start rxgate with storage.driver: postgres\n", n, *from)
	return nil
}
