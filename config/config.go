// Package config loads rxgate's configuration: built-in defaults, then a YAML
// file, then RXGATE_ environment variables, then flags.
//
// Load only assembles and decodes; it does not check values. Callers run
// Validate (or ValidateServe before serving), which reports every problem at
// once, one line per problem, each naming its dotted key.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/structs"
	"github.com/knadh/koanf/v2"
)

// EnvPrefix starts every environment variable Load reads. After the prefix the
// name is lower-cased and "__" separates levels: RXGATE_ADMIN__API_KEY sets
// admin.api_key. Single underscores are part of the key name.
const EnvPrefix = "RXGATE_"

// TestEnvPrefix starts the variables of rxgate's test kits
// (RXGATE_TEST_POSTGRES_URL, ...). Load ignores them: a machine that runs
// the tests may export them while rxgate runs.
const TestEnvPrefix = "RXGATE_TEST_"

// envLevelSep separates nesting levels in environment variable names.
const envLevelSep = "__"

// MinAPIKeyLen is the shortest admin.api_key accepted.
const MinAPIKeyLen = 16

// redacted replaces secrets in Redacted.
const redacted = "REDACTED"

// Config is rxgate's complete configuration. The koanf tags are the dotted
// keys used in the YAML file, in RXGATE_ variables and in Options.Flags.
type Config struct {
	HTTP     HTTP     `koanf:"http"`
	Admin    Admin    `koanf:"admin"`
	Storage  Storage  `koanf:"storage"`
	Auth     Auth     `koanf:"auth"`
	Log      Log      `koanf:"log"`
	Webhooks Webhooks `koanf:"webhooks"`
	Audit    Audit    `koanf:"audit"`
}

// Audit configures the audit trail (issue 27): who read or changed what,
// as a hash chain with signed checkpoints.
type Audit struct {
	// Enabled appends an entry for every request of the partner API's
	// authenticated routes, of the operator API and of the console.
	Enabled bool `koanf:"enabled"`
	// Retention is how long entries are kept before the janitor purges
	// them (apart from webhooks.retention); 0 keeps them forever.
	Retention time.Duration `koanf:"retention"`
	// CheckpointEvery signs a checkpoint after this many entries (1 to
	// 1,000,000).
	CheckpointEvery int `koanf:"checkpoint_every"`
	// CheckpointInterval signs a checkpoint at least this often while
	// entries are appended (1s or more).
	CheckpointInterval time.Duration `koanf:"checkpoint_interval"`
	// KeyFile holds the Ed25519 key that signs checkpoints (base64 of its
	// 32-byte seed), created with mode 0600 on first start when missing;
	// it must not be readable by group or others. Empty keeps the key in
	// the store, where whoever can edit the store can also re-sign a
	// rewritten chain: set it, on a disk the store's editors cannot reach,
	// for checkpoints that hold against them.
	KeyFile string `koanf:"key_file"`
}

// HTTP configures the public partner API listener.
type HTTP struct {
	// Listen is the host:port the API binds; port 0 picks a free port.
	Listen string `koanf:"listen"`
	// BasePath prefixes every API route. It starts with "/" and does not end
	// with "/"; "" mounts the API at the root.
	BasePath string `koanf:"base_path"`
	// ErrorsBase is the absolute URL, without trailing slash, that problem
	// type URIs are built under.
	ErrorsBase string `koanf:"errors_base"`
	// PublicURL is the externally visible base URL including BasePath
	// (e.g. https://rx.example.org/external); empty derives it from Listen.
	PublicURL string `koanf:"public_url"`
	// MaxBodyBytes caps request bodies.
	MaxBodyBytes int64 `koanf:"max_body_bytes"`
	// MaxHeaderBytes caps a request's line and headers together, on both
	// listeners (the largest legitimate request: a token of at most 16 KiB
	// plus the spec's headers).
	MaxHeaderBytes int `koanf:"max_header_bytes"`
	// MaxConnections caps the connections each listener holds at once;
	// more wait to be accepted.
	MaxConnections int `koanf:"max_connections"`
	// ReadHeaderTimeout bounds reading a request's line and headers.
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// WriteTimeout bounds writing a response.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// IdleTimeout closes a kept-alive connection that sends no request.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// MaxBulkDrugs is the longest array a bulk custom drug create accepts
	// (the spec leaves it open).
	MaxBulkDrugs int `koanf:"max_bulk_drugs"`
	// MaxValidationEntries caps error.validation, so that a small body of
	// many bad members cannot make a huge answer.
	MaxValidationEntries int `koanf:"max_validation_entries"`
	// ShutdownTimeout bounds the graceful drain on SIGINT/SIGTERM.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
}

// Admin configures the operator listener.
type Admin struct {
	// Listen is the host:port the admin API binds; port 0 picks a free port.
	Listen string `koanf:"listen"`
	// PublicURL is the operator listener's URL as its clients reach it
	// (behind a proxy or a load balancer), without a trailing slash: the
	// operator document's server and the console's links use it. ""
	// derives it from Listen.
	PublicURL string `koanf:"public_url"`
	// APIKey authenticates admin requests. It has no default; ValidateServe
	// requires it. Never log it: use Redacted.
	APIKey string `koanf:"api_key"`
	// APIKeyFile, when set, is a file holding APIKey (the Docker and
	// Kubernetes secrets convention): its content, trailing newlines
	// trimmed. Setting it and APIKey both is refused, and so is a file
	// group or others may read or write.
	APIKeyFile string `koanf:"api_key_file"`
	// ConsoleSessionTTL is how long a console sign-in lasts.
	ConsoleSessionTTL time.Duration `koanf:"console_session_ttl"`
	// AllowedHosts are the host names, besides IP literals, localhost and
	// PublicURL's host, that the listener answers for (the Host header,
	// any port); a request naming another host is refused (421), so that a
	// web page whose DNS name is rebound to this listener cannot call it.
	AllowedHosts []string `koanf:"allowed_hosts"`
	// KeyFailureBurst is how many wrong operator keys (or sign-in links)
	// one client address may present before its further attempts are
	// refused (429); after it, one more attempt is allowed every
	// KeyFailureInterval. 0 turns the limit off.
	KeyFailureBurst int `koanf:"key_failure_burst"`
	// KeyFailureInterval is how often a limited address earns one more
	// attempt.
	KeyFailureInterval time.Duration `koanf:"key_failure_interval"`
}

// MaxKeyFailureBurst bounds admin.key_failure_burst.
const MaxKeyFailureBurst = 10_000

// Badger durabilities (storage.badger.durability).
const (
	// DurabilityJournal makes each commit durable with the store's own
	// write-ahead journal, Badger running without SyncWrites: the default.
	DurabilityJournal = "journal"
	// DurabilitySyncWrites runs Badger with SyncWrites and no journal. It
	// exists to compare the two (make bench-load, make powercut), not for
	// production: make powercut's kill-then-cut mode has lost
	// acknowledged writes with it, and never with the journal.
	DurabilitySyncWrites = "syncwrites"
)

// Badger configures the badger driver.
type Badger struct {
	// Durability is how a commit is made durable before it is
	// acknowledged: journal (the default) or syncwrites, which exists only
	// to compare the two.
	Durability string `koanf:"durability"`
}

// Storage says which backend keeps the data and where. With the badger
// driver exactly one of Dir and InMemory is set; with postgres,
// Postgres.URL (or URLFile) is.
type Storage struct {
	// Driver is the backend: badger (the embedded default) or postgres
	// (a database several rxgate processes share).
	Driver string `koanf:"driver"`
	// Postgres configures the postgres driver.
	Postgres Postgres `koanf:"postgres"`
	// Dir is the Badger data directory.
	Dir string `koanf:"dir"`
	// InMemory keeps everything in memory; data is lost on exit.
	InMemory bool `koanf:"in_memory"`
	// MaxRecordBytes bounds one stored record, encoded: a write that would
	// store a larger one is refused (413) before it reaches the disk.
	// MinRecordBytes to MaxRecordBytesLimit.
	MaxRecordBytes int `koanf:"max_record_bytes"`
	// EncryptionKeyFile, when set, names a file holding the 32-byte key
	// (base64) that encrypts the store at rest (ReadKeyFile). The file must
	// not be readable by group or others.
	EncryptionKeyFile string `koanf:"encryption_key_file"`
	// JournalSkipCorrupt opens a Badger store whose journal holds damaged
	// records, which it otherwise refuses to open: they are dropped, with
	// the acknowledged writes in them, and each is logged. For recovery
	// only: unset it once the store has started.
	JournalSkipCorrupt bool `koanf:"journal_skip_corrupt"`
	// Badger configures the badger driver.
	Badger Badger `koanf:"badger"`
	// GCInterval is how often Badger's value log is garbage collected, so
	// that deleted data gives its disk space back; 0 never.
	GCInterval time.Duration `koanf:"gc_interval"`
	// Backup schedules backups for a server with no other tooling.
	Backup Backup `koanf:"backup"`
}

// Postgres configures the PostgreSQL backend.
type Postgres struct {
	// URL is the connection string (postgres://user:pass@host:5432/db or
	// libpq's key=value form). It may hold a password: never log it (use
	// Redacted).
	URL string `koanf:"url"`
	// URLFile, when set, is a file holding URL (the Docker and Kubernetes
	// secrets convention). Setting it and URL both is refused, and so is
	// a file group or others may read or write: the URL may hold a
	// password.
	URLFile string `koanf:"url_file"`
	// MaxConns bounds the connection pool of each rxgate process.
	MaxConns int `koanf:"max_conns"`
	// ConnectTimeout bounds the wait for the database at start: after it,
	// rxgate exits with an error.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`
	// StatementTimeout is PostgreSQL's statement_timeout on every
	// connection: rxgate's statements take milliseconds, and one that runs
	// this long is cancelled (503) rather than hold its connection and
	// locks. Each call to the database is bounded by twice it. 0 leaves
	// the server's setting.
	StatementTimeout time.Duration `koanf:"statement_timeout"`
	// LockTimeout is lock_timeout on every connection: the longest a
	// statement waits for a lock (a row another transaction holds, an
	// endpoint's claim slot among them) before it fails (503; the queue
	// tries again).
	// 0 leaves the server's setting.
	LockTimeout time.Duration `koanf:"lock_timeout"`
	// IdleInTransactionTimeout is idle_in_transaction_session_timeout on
	// every connection: the server ends a session that sits in a
	// transaction this long without a statement. rxgate's transactions
	// never wait on anything but the database, so such a session belongs
	// to a replica that hung or was cut off, and may hold the claim
	// slots of the endpoints it was claiming for, whose deliveries wait
	// for them on every replica. 0 leaves the server's setting.
	IdleInTransactionTimeout time.Duration `koanf:"idle_in_transaction_timeout"`
	// NetworkTimeout is how long a connection whose peer stopped
	// answering lasts before either end drops it: rxgate's TCP keepalives
	// and the server's (tcp_keepalives_* and tcp_user_timeout, set per
	// connection) are derived from it. 0 leaves the systems' defaults
	// (about two hours).
	NetworkTimeout time.Duration `koanf:"network_timeout"`
	// ReplicaID names this process among the replicas sharing the
	// database: its leases on webhook jobs carry it, so that a process
	// restarted under the same id takes back at once the leases its dead
	// predecessor held, and a second live process under an id in use is
	// refused at start. "" means the host name (ReplicaName); replicas
	// that share a host need ids of their own.
	ReplicaID string `koanf:"replica_id"`
	// Listen keeps a connection that LISTENs for the other replicas'
	// webhook jobs, so that a job another replica queued is delivered at
	// once. false is for a database reached through a pooler in
	// transaction mode (PgBouncer's pool_mode = transaction), which
	// cannot keep a LISTEN: the queue then finds those jobs by polling,
	// within a few seconds.
	Listen bool `koanf:"listen"`
}

// maxReplicaID bounds storage.postgres.replica_id: a name for logs and a
// key, not a description.
const maxReplicaID = 63

// ReplicaName returns the replica id the process runs under: ReplicaID,
// or when it is "" the host name, its characters outside the id's
// alphabet (validReplicaID) replaced by '-' and cut to the id's length,
// or "rxgate" when the host has no name.
func (p Postgres) ReplicaName() string {
	if p.ReplicaID != "" {
		return p.ReplicaID
	}
	host, _ := os.Hostname()
	id := []byte(host)
	for i, c := range id {
		if !replicaIDChar(c) {
			id[i] = '-'
		}
	}
	if len(id) > maxReplicaID {
		id = id[:maxReplicaID]
	}
	if len(id) == 0 {
		return "rxgate"
	}
	return string(id)
}

// replicaIDChar reports whether c may appear in a replica id: ASCII
// letters, digits, '.', '_' and '-', which a host name, a pod name or a
// systemd instance name is made of, and which need no quoting in a log.
func replicaIDChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// validReplicaID reports whether id is a valid storage.postgres.replica_id:
// 1 to maxReplicaID characters of replicaIDChar's.
func validReplicaID(id string) bool {
	if id == "" || len(id) > maxReplicaID {
		return false
	}
	for i := range len(id) {
		if !replicaIDChar(id[i]) {
			return false
		}
	}
	return true
}

// Storage drivers.
const (
	DriverBadger   = "badger"
	DriverPostgres = "postgres"
)

// Backup schedules backups: every Interval (0: never) a backup is written
// to Dir, and the oldest beyond Keep are deleted.
type Backup struct {
	Dir      string        `koanf:"dir"`
	Interval time.Duration `koanf:"interval"`
	Keep     int           `koanf:"keep"`
}

// Auth configures bearer token verification and the built-in token issuer.
type Auth struct {
	// JWKSURL is where verification keys come from. It may be empty only
	// when BuiltinIssuer is on; then the server's own
	// /.well-known/jwks.json is used.
	JWKSURL string `koanf:"jwks_url"`
	// Issuer is the required "iss" claim.
	Issuer string `koanf:"issuer"`
	// Audience is the required "aud" claim.
	Audience string `koanf:"audience"`
	// ScopeClaim names the claim holding scopes: scope, scp or permissions.
	ScopeClaim string `koanf:"scope_claim"`
	// BuiltinIssuer turns on the /v1/token endpoint and the server's JWKS.
	BuiltinIssuer bool `koanf:"builtin_issuer"`
	// Leeway is the clock skew tolerated on exp/nbf/iat (0..5m).
	Leeway time.Duration `koanf:"leeway"`
	// TokenTTL is the lifetime of tokens from /v1/token (1m..24h).
	TokenTTL time.Duration `koanf:"token_ttl"`
	// JWKSRefresh is the minimum interval between JWKS refreshes (>= 1m).
	// While no usable key is loaded, fetches back off from 1s up to it.
	JWKSRefresh time.Duration `koanf:"jwks_refresh"`
}

// Log configures the process logger.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `koanf:"level"`
	// Format is json or text.
	Format string `koanf:"format"`
}

// Webhooks configures outgoing webhook delivery.
type Webhooks struct {
	// Workers is the number of concurrent deliveries (1..256).
	Workers int `koanf:"workers"`
	// Timeout bounds one delivery attempt.
	Timeout time.Duration `koanf:"timeout"`
	// Lease is how long a claimed delivery stays with the process that
	// claimed it unless renewed (it is renewed every third of it): a
	// replica that dies holds its deliveries this long before another
	// takes them over. 0 means twice Timeout plus a minute.
	Lease time.Duration `koanf:"lease"`
	// MaxAttempts is the number of attempts before a job is dead (1..100).
	MaxAttempts int `koanf:"max_attempts"`
	// BackoffBase is the delay before the first retry.
	BackoffBase time.Duration `koanf:"backoff_base"`
	// BackoffMax caps the retry delay; it is at least BackoffBase.
	BackoffMax time.Duration `koanf:"backoff_max"`
	// RotationGrace is how long the previous signing secret stays valid
	// after a rotation.
	RotationGrace time.Duration `koanf:"rotation_grace"`
	// Retention is how long delivered, failed and skipped events are kept
	// before they are purged with their attempts; 0 keeps them forever.
	// A pending event is never purged.
	Retention time.Duration `koanf:"retention"`
	// AllowInsecureLoopback permits plain-http endpoints on loopback
	// addresses (for local development and tests); without it no delivery
	// connects to a loopback address, over https either.
	AllowInsecureLoopback bool `koanf:"allow_insecure_loopback"`
	// AllowedNetworks are CIDR networks deliveries may connect to although
	// they are private, link-local or otherwise not public, which
	// deliveries are otherwise refused (an on-premise operator's own
	// receivers). An entry opens loopback only if it lies inside it
	// (127.0.0.0/8, ::1/128). In the environment, a comma-separated list.
	AllowedNetworks []string `koanf:"allowed_networks"`
	// CAFile is an optional PEM bundle trusted for endpoints; it must exist.
	CAFile string `koanf:"ca_file"`
	// DisableAfter disables an endpoint whose every attempt has failed for
	// this long (its deliveries are held until it is enabled); 0 never
	// disables one. Default 120h (five days, as Svix).
	DisableAfter time.Duration `koanf:"disable_after"`
	// OperatorURL, when set, receives an endpoint.disabled event, signed
	// with OperatorSecret by the spec's scheme, when an endpoint is
	// disabled. It is the operator's own URL: the destination policy of
	// deliveries (allowed_networks) does not apply to it.
	OperatorURL string `koanf:"operator_url"`
	// OperatorSecret signs the operational events; required with
	// OperatorURL. Never log it: use Redacted.
	OperatorSecret string `koanf:"operator_secret"`
	// RecoverRate is how many replayed deliveries per second a recovery
	// (POST .../recover) schedules for one endpoint (1 to 10,000).
	RecoverRate int `koanf:"recover_rate"`
}

// minHeaderBytes is the smallest http.max_header_bytes: below it a
// request with a token of ordinary size could not be read.
const minHeaderBytes = 4 << 10

// The largest values the request limits may be raised to.
const (
	// MaxBulkDrugsLimit: 10,000 drugs of ordinary size are about the
	// default 4 MiB body.
	MaxBulkDrugsLimit = 10_000
	// MinRecordBytes and MaxRecordBytesLimit bound storage.max_record_bytes:
	// below 4 KiB an ordinary patient could not be stored; above 1 MiB one
	// record would be a large share of a Badger value log entry and of a
	// PostgreSQL row's practical size.
	MinRecordBytes      = 4 << 10
	MaxRecordBytesLimit = 1 << 20
	// MaxValidationEntriesLimit bounds the work of listing a request's
	// problems, whatever http.max_validation_entries says.
	MaxValidationEntriesLimit = 1000
)

// Defaults returns the built-in configuration. It is not valid on its own:
// storage and auth.jwks_url (or auth.builtin_issuer) must still be chosen.
func Defaults() *Config {
	return &Config{
		HTTP: HTTP{
			Listen:            "127.0.0.1:8080",
			BasePath:          "/external",
			ErrorsBase:        "https://errors.rxgate.dev",
			MaxBodyBytes:      4 << 20,
			MaxHeaderBytes:    64 << 10,
			MaxConnections:    1024,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       15 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ShutdownTimeout:   15 * time.Second,

			MaxBulkDrugs:         2000,
			MaxValidationEntries: 100,
		},
		Admin: Admin{
			Listen:             "127.0.0.1:8081",
			ConsoleSessionTTL:  12 * time.Hour,
			AllowedHosts:       []string{},
			KeyFailureBurst:    10,
			KeyFailureInterval: 10 * time.Second,
		},
		Storage: Storage{
			Driver: DriverBadger,
			Postgres: Postgres{
				MaxConns: 16, ConnectTimeout: 30 * time.Second,
				// A statement timeout two orders of magnitude above what
				// rxgate's statements take, and no longer than an HTTP
				// answer may take (http.write_timeout); a lock timeout
				// far above the few round trips a claim slot and row
				// locks are held for; an idle-in-transaction timeout no
				// longer than
				// the lock timeout, so that a replica gone silent in the
				// middle of a claim is cut off before a claim waiting
				// behind it gives up, and deliveries pause at most that
				// long; a dead peer noticed in 30s, not the two hours of
				// the systems' keepalive defaults.
				StatementTimeout: 30 * time.Second, LockTimeout: 10 * time.Second,
				IdleInTransactionTimeout: 10 * time.Second, NetworkTimeout: 30 * time.Second,
				Listen: true,
			},
			Badger:         Badger{Durability: DurabilityJournal},
			MaxRecordBytes: 256 << 10,
			GCInterval:     10 * time.Minute,
			Backup:         Backup{Keep: 7},
		},
		Auth: Auth{
			Issuer:      "rxgate",
			Audience:    "rxgate-partner-api",
			ScopeClaim:  "scope",
			Leeway:      30 * time.Second,
			TokenTTL:    time.Hour,
			JWKSRefresh: 15 * time.Minute,
		},
		Log: Log{
			Level:  "info",
			Format: "json",
		},
		Webhooks: Webhooks{
			Workers:       16,
			Timeout:       10 * time.Second,
			MaxAttempts:   3,
			BackoffBase:   time.Second,
			BackoffMax:    time.Minute,
			RotationGrace: 24 * time.Hour,
			Retention:     30 * 24 * time.Hour,
			DisableAfter:  120 * time.Hour,
			RecoverRate:   10,
			// Empty, not nil: the example file's "[]" loads as this.
			AllowedNetworks: []string{},
		},
		Audit: Audit{
			Enabled:            true,
			Retention:          DefaultAuditRetention,
			CheckpointEvery:    1000,
			CheckpointInterval: 10 * time.Minute,
		},
	}
}

// DefaultAuditRetention is audit.retention's default: seven years (2555
// days), what health-record rules commonly ask of an access log.
const DefaultAuditRetention = 2555 * 24 * time.Hour

// Options says where Load reads from.
type Options struct {
	// Path is the YAML file; empty skips the file layer. A missing file is
	// an error.
	Path string
	// Environ is os.Environ() in production and a fixed slice in tests;
	// Load never reads the process environment itself.
	Environ []string
	// Flags holds already-parsed flag overrides keyed by dotted path
	// ("http.listen" -> "127.0.0.1:9000"), applied last.
	Flags map[string]any
}

// Load layers Defaults, the file at opts.Path, RXGATE_ variables from
// opts.Environ and opts.Flags, later layers winning, and decodes the result.
//
// Unknown keys and undecodable values are errors naming the dotted key and
// where it came from; all of them are reported together. A key present with
// a null value in the file (e.g. "base_path:" with nothing after it) keeps
// its default. Load does not validate values: call Validate or ValidateServe.
func Load(opts Options) (*Config, error) {
	ko := koanf.New(".")
	if err := ko.Load(structs.Provider(Defaults(), "koanf"), nil); err != nil {
		return nil, fmt.Errorf("config: load defaults: %w", err)
	}
	leaves := leafKeys(ko)

	var errs []error
	origin := make(map[string]string) // dotted key -> the layer that set it last

	if opts.Path != "" {
		layer, err := loadFile(opts.Path)
		if err != nil {
			return nil, err
		}
		errs = append(errs, mergeLayer(ko, layer, leaves, origin, func(string) string {
			return opts.Path
		})...)
	}

	envNames := make(map[string]string) // dotted key -> variable name
	envLayer := koanf.New(".")
	err := envLayer.Load(env.Provider(".", env.Opt{
		Prefix: EnvPrefix,
		TransformFunc: func(name, value string) (string, any) {
			key := envKey(name)
			if key != "" {
				envNames[key] = name
			}
			return key, value
		},
		EnvironFunc: func() []string {
			out := make([]string, 0, len(opts.Environ))
			for _, kv := range opts.Environ {
				if !strings.HasPrefix(kv, TestEnvPrefix) {
					out = append(out, kv)
				}
			}
			return out
		},
	}), nil)
	if err != nil {
		return nil, fmt.Errorf("config: load environment: %w", err)
	}
	errs = append(errs, mergeLayer(ko, envLayer, leaves, origin, func(key string) string {
		if name, ok := envNames[key]; ok {
			return "environment variable " + name
		}
		return "environment"
	})...)

	if len(opts.Flags) > 0 {
		flagLayer := koanf.New(".")
		if err := flagLayer.Load(confmap.Provider(opts.Flags, "."), nil); err != nil {
			return nil, fmt.Errorf("config: load flags: %w", err)
		}
		errs = append(errs, mergeLayer(ko, flagLayer, leaves, origin, func(string) string {
			return "flags"
		})...)
	}

	cfg := &Config{}
	err = ko.UnmarshalWithConf("", cfg, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook: mapstructure.ComposeDecodeHookFunc(
				durationHook,
				// A list from the environment is one string: "a,b".
				mapstructure.StringToSliceHookFunc(","),
				mapstructure.StringToTimeDurationHookFunc(),
				// A list from an environment variable is comma-separated
				// (RXGATE_ADMIN__ALLOWED_HOSTS=a.example,b.example).
				mapstructure.StringToSliceHookFunc(","),
				mapstructure.TextUnmarshallerHookFunc(),
			),
			// Environment values are strings; "true", "8" must still decode.
			WeaklyTypedInput: true,
			// Safety net: unknown keys are already removed and reported by
			// mergeLayer, so this fires only if the two ever disagree.
			ErrorUnused: true,
			// Keys are case-sensitive, as mergeLayer checks them.
			MatchName: func(mapKey, fieldName string) bool { return mapKey == fieldName },
		},
	})
	if err != nil {
		errs = append(errs, decodeErrors(err, origin)...)
	}

	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := errors.Join(cfg.readSecretFiles()...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// KeyBytes is the length of an encryption key: AES-256.
const KeyBytes = 32

// ReadKeyFile reads an encryption key from path, named by the config key
// name in errors: base64 (standard or URL alphabet, padded or not) of
// KeyBytes bytes, trailing newlines trimmed. Like ssh with a private key,
// it refuses a file that group or others may read or write (checkOwnerOnly).
// An error never quotes the file's content.
func ReadKeyFile(name, path string) ([]byte, error) {
	if err := checkOwnerOnly(name, path); err != nil {
		return nil, err
	}
	v, err := readSecretFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", name, err)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(v); err == nil && len(key) == KeyBytes {
			return key, nil
		}
	}
	return nil, fmt.Errorf("config: %s: %s does not hold a key: base64 of %d bytes is expected (rxgate keygen writes one)", name, path, KeyBytes)
}

// checkOwnerOnly refuses the file at path, named by the setting name in
// errors, when group or others may read or write it, as ssh refuses such a
// private key: every file holding a secret (the encryption key, the
// operator key, the database URL with its password) is checked by this one
// rule. The error names the setting, the file and its mode.
func checkOwnerOnly(name, path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("config: %s: %w", name, err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("config: %s: %s is accessible by others (mode %04o); it must be readable by its owner only: chmod 600 %s", name, path, perm, path)
	}
	return nil
}

// maxSecretFileBytes bounds a secret file: a secret is short, and a large
// file is a mistake (a wrong path), not a secret.
const maxSecretFileBytes = 64 << 10

// readSecretFiles sets every secret from its <key>_file setting: the
// file's content, trailing newlines trimmed. A file group or others may
// read or write is refused (checkOwnerOnly). An error names the keys and
// the file, never the content.
func (c *Config) readSecretFiles() []error {
	var errs []error
	for _, s := range []struct {
		key   string
		value *string
		file  string
	}{
		{"admin.api_key", &c.Admin.APIKey, c.Admin.APIKeyFile},
		{"storage.postgres.url", &c.Storage.Postgres.URL, c.Storage.Postgres.URLFile},
	} {
		if s.file == "" {
			continue
		}
		if *s.value != "" {
			errs = append(errs, fmt.Errorf("config: %s and %s_file are both set; set one", s.key, s.key))
			continue
		}
		if err := checkOwnerOnly(s.key+"_file", s.file); err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := readSecretFile(s.file)
		if err != nil {
			errs = append(errs, fmt.Errorf("config: %s_file: %w", s.key, err))
			continue
		}
		*s.value = v
	}
	return errs
}

// readSecretFile returns path's content without its trailing newlines.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxSecretFileBytes {
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxSecretFileBytes)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// loadFile reads and parses the YAML file at p.
func loadFile(p string) (*koanf.Koanf, error) {
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("config: file %s does not exist", p)
	case err != nil:
		return nil, fmt.Errorf("config: %w", err)
	case info.IsDir():
		return nil, fmt.Errorf("config: file %s is a directory", p)
	}
	layer := koanf.New(".")
	if err := layer.Load(file.Provider(p), yaml.Parser()); err != nil {
		return nil, fmt.Errorf("config: parse %s: %w", p, err)
	}
	return layer, nil
}

// envKey maps RXGATE_HTTP__BASE_PATH to http.base_path. A name that is only
// the prefix maps to "" and is ignored.
func envKey(name string) string {
	rest := strings.TrimPrefix(name, EnvPrefix)
	return strings.ReplaceAll(strings.ToLower(rest), envLevelSep, ".")
}

// leafKeys returns the set of leaf keys in ko.
func leafKeys(ko *koanf.Koanf) map[string]bool {
	set := make(map[string]bool)
	for _, k := range ko.Keys() {
		set[k] = true
	}
	return set
}

// isSection reports whether key is a proper prefix of a known leaf key.
func isSection(key string, leaves map[string]bool) bool {
	for leaf := range leaves {
		if strings.HasPrefix(leaf, key+".") {
			return true
		}
	}
	return false
}

// mergeLayer checks every key of layer against the known leaves, drops
// unknown ones (returning one error each) and null values, records where each
// remaining key came from and merges the layer into ko.
func mergeLayer(ko, layer *koanf.Koanf, leaves map[string]bool, origin map[string]string, source func(key string) string) []error {
	var errs []error
	keys := layer.Keys()
	slices.Sort(keys)
	for _, key := range keys {
		val := layer.Get(key)
		empty := val == nil
		if m, ok := val.(map[string]any); ok && len(m) == 0 {
			empty = true
		}
		switch {
		case leaves[key] && !empty:
			origin[key] = source(key)
		case leaves[key] || (empty && isSection(key, leaves)):
			// A null leaf or an empty section keeps the defaults.
			layer.Delete(key)
		case isSection(key, leaves):
			errs = append(errs, fmt.Errorf("config: %s: must be a mapping, not a single value (from %s)", key, source(key)))
			layer.Delete(key)
		default:
			errs = append(errs, fmt.Errorf("config: unknown key %q (from %s)", key, source(key)))
			layer.Delete(key)
		}
	}
	if err := ko.Merge(layer); err != nil {
		errs = append(errs, fmt.Errorf("config: merge: %w", err))
	}
	return errs
}

// decodeErrors turns a mapstructure error tree into one error per failing
// key, each naming the key and the layer that set it.
func decodeErrors(err error, origin map[string]string) []error {
	var out []error
	var walk func(error)
	walk = func(err error) {
		if de, ok := err.(*mapstructure.DecodeError); ok {
			inner := de.Unwrap()
			var nested *mapstructure.DecodeError
			if _, multi := inner.(interface{ Unwrap() []error }); multi || errors.As(inner, &nested) {
				walk(inner)
				return
			}
			key := de.Name()
			msg := fmt.Sprintf("config: %s: %v", key, inner)
			var pe *mapstructure.ParseError
			if errors.As(inner, &pe) {
				// mapstructure's own text drops the offending value.
				msg = fmt.Sprintf("config: %s: cannot parse %q as %s", key, fmt.Sprint(pe.Value), pe.Expected.Type())
			}
			if src, ok := origin[key]; ok {
				msg += " (from " + src + ")"
			}
			out = append(out, errors.New(msg))
			return
		}
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
			return
		case interface{ Unwrap() error }:
			// Descend only through wrappers of decode errors (mapstructure's
			// "decoding failed due to..." header); keep any other chain whole.
			var de *mapstructure.DecodeError
			if inner := e.Unwrap(); errors.As(inner, &de) {
				walk(inner)
				return
			}
		}
		out = append(out, fmt.Errorf("config: %w", err))
	}
	walk(err)
	return out
}

var durationType = reflect.TypeFor[time.Duration]()

// durationHook decodes duration strings with a message that keeps the bad
// value, and rejects bare numbers (YAML "timeout: 10" would otherwise mean
// 10ns) except 0.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType || from == durationType {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
		s := strings.TrimSpace(data.(string))
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("invalid duration %q (want a number with a unit, e.g. \"15s\", \"1m\", \"24h\")", s)
		}
		return d, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if reflect.ValueOf(data).IsZero() {
			return time.Duration(0), nil
		}
		return nil, fmt.Errorf("invalid duration %v: a bare number has no unit (write e.g. \"%vs\")", data, data)
	}
	return data, nil
}

// problems collects validation failures, one per line.
type problems []error

// addf records a problem with key; the message must never contain secrets.
func (p *problems) addf(key, format string, args ...any) {
	*p = append(*p, fmt.Errorf("config: %s: %s", key, fmt.Sprintf(format, args...)))
}

// Validate checks every value and returns all problems at once
// (errors.Join), one line per problem, each naming its dotted key, e.g.
// "config: http.listen: must be host:port". It returns nil when c is valid.
// It does not require admin.api_key; ValidateServe does.
func (c *Config) Validate() error {
	return errors.Join(c.problems()...)
}

// ValidateServe is Validate plus what serving needs: admin.api_key must be
// set (and, as Validate already checks, at least MinAPIKeyLen characters).
func (c *Config) ValidateServe() error {
	p := problems(c.problems())
	if c.Admin.APIKey == "" {
		p.addf("admin.api_key", "required")
	}
	return errors.Join(p...)
}

// Redacted returns a copy of c safe to log: admin.api_key is replaced by
// "REDACTED" when set.
func (c *Config) Redacted() *Config {
	if c == nil {
		return nil
	}
	// Config holds values and one slice (admin.allowed_hosts, cloned
	// below), so the copy shares nothing with c. Revisit if that changes.
	cp := *c
	cp.Admin.AllowedHosts = slices.Clone(c.Admin.AllowedHosts)
	if cp.Admin.APIKey != "" {
		cp.Admin.APIKey = redacted
	}
	if cp.Storage.Postgres.URL != "" {
		cp.Storage.Postgres.URL = redacted
	}
	if cp.Webhooks.OperatorSecret != "" {
		cp.Webhooks.OperatorSecret = redacted
	}
	return &cp
}

func (c *Config) problems() []error {
	var p problems

	// http
	checkListen(&p, "http.listen", c.HTTP.Listen)
	checkBasePath(&p, "http.base_path", c.HTTP.BasePath)
	if c.HTTP.ErrorsBase == "" {
		p.addf("http.errors_base", "required")
	} else {
		checkBaseURL(&p, "http.errors_base", c.HTTP.ErrorsBase)
	}
	if c.Admin.PublicURL != "" {
		checkBaseURL(&p, "admin.public_url", c.Admin.PublicURL)
	}
	if c.HTTP.PublicURL != "" {
		checkBaseURL(&p, "http.public_url", c.HTTP.PublicURL)
	}
	if c.HTTP.MaxBodyBytes <= 0 {
		p.addf("http.max_body_bytes", "must be greater than 0, got %d", c.HTTP.MaxBodyBytes)
	}
	if c.HTTP.MaxHeaderBytes < minHeaderBytes {
		p.addf("http.max_header_bytes", "must be at least %d, got %d", minHeaderBytes, c.HTTP.MaxHeaderBytes)
	}
	if c.HTTP.MaxConnections < 1 {
		p.addf("http.max_connections", "must be at least 1, got %d", c.HTTP.MaxConnections)
	}
	checkPositive(&p, "http.read_header_timeout", c.HTTP.ReadHeaderTimeout)
	checkPositive(&p, "http.read_timeout", c.HTTP.ReadTimeout)
	checkPositive(&p, "http.write_timeout", c.HTTP.WriteTimeout)
	checkPositive(&p, "http.idle_timeout", c.HTTP.IdleTimeout)
	if c.HTTP.MaxBulkDrugs < 1 || c.HTTP.MaxBulkDrugs > MaxBulkDrugsLimit {
		p.addf("http.max_bulk_drugs", "must be from 1 to %d, got %d", MaxBulkDrugsLimit, c.HTTP.MaxBulkDrugs)
	}
	if c.HTTP.MaxValidationEntries < 1 || c.HTTP.MaxValidationEntries > MaxValidationEntriesLimit {
		p.addf("http.max_validation_entries", "must be from 1 to %d, got %d", MaxValidationEntriesLimit, c.HTTP.MaxValidationEntries)
	}
	checkPositive(&p, "http.shutdown_timeout", c.HTTP.ShutdownTimeout)

	// admin
	checkListen(&p, "admin.listen", c.Admin.Listen)
	if sameAddr(c.HTTP.Listen, c.Admin.Listen) {
		p.addf("admin.listen", "must not use the same address as http.listen (%s)", c.HTTP.Listen)
	}
	if key := c.Admin.APIKey; key != "" {
		// Never echo the key itself.
		if n := utf8.RuneCountInString(key); n < MinAPIKeyLen {
			p.addf("admin.api_key", "must be at least %d characters, got %d", MinAPIKeyLen, n)
		}
		if strings.TrimFunc(key, unicode.IsSpace) != key {
			p.addf("admin.api_key", "must not start or end with whitespace")
		}
	}

	// storage
	switch c.Storage.Driver {
	case DriverBadger:
		switch {
		case c.Storage.Dir == "" && !c.Storage.InMemory:
			p.addf("storage.dir", "required unless storage.in_memory is true")
		case c.Storage.Dir != "" && c.Storage.InMemory:
			p.addf("storage.dir", "must be empty when storage.in_memory is true (set exactly one)")
		}
		if d := c.Storage.Badger.Durability; d != DurabilityJournal && d != DurabilitySyncWrites {
			p.addf("storage.badger.durability", "must be %s or %s, got %q", DurabilityJournal, DurabilitySyncWrites, d)
		}
		if c.Storage.EncryptionKeyFile != "" && c.Storage.InMemory {
			p.addf("storage.encryption_key_file", "must be empty when storage.in_memory is true (nothing is written to disk)")
		}
	case DriverPostgres:
		if c.Storage.Postgres.URL == "" {
			p.addf("storage.postgres.url", "required when storage.driver is postgres (or storage.postgres.url_file)")
		}
		for key, set := range map[string]bool{
			"storage.dir": c.Storage.Dir != "", "storage.in_memory": c.Storage.InMemory,
			"storage.encryption_key_file": c.Storage.EncryptionKeyFile != "",
			"storage.backup.interval":     c.Storage.Backup.Interval != 0,

			"storage.journal_skip_corrupt": c.Storage.JournalSkipCorrupt,
			"storage.badger.durability":    c.Storage.Badger.Durability != DurabilityJournal,
		} {
			if set {
				p.addf(key, "is for the badger driver; with postgres the database keeps, encrypts and backs up the data (leave it unset)")
			}
		}
	default:
		p.addf("storage.driver", "must be badger or postgres, got %q", c.Storage.Driver)
	}
	if n := c.Storage.Postgres.MaxConns; n < 1 || n > 1000 {
		p.addf("storage.postgres.max_conns", "must be between 1 and 1000, got %d", n)
	}
	checkPositive(&p, "storage.postgres.connect_timeout", c.Storage.Postgres.ConnectTimeout)
	checkPostgresTimeouts(&p, c.Storage.Postgres)
	if id := c.Storage.Postgres.ReplicaID; id != "" && !validReplicaID(id) {
		p.addf("storage.postgres.replica_id", "must be 1 to %d letters, digits, '.', '_' or '-' (\"\" means the host name), got %q", maxReplicaID, id)
	}
	if b := c.Storage.Backup; b.Interval != 0 {
		if b.Interval < time.Minute {
			p.addf("storage.backup.interval", "must be 0 (never) or at least 1m, got %s", b.Interval)
		}
		if b.Dir == "" {
			p.addf("storage.backup.dir", "required when storage.backup.interval is set")
		}
	}
	if c.Storage.Backup.Keep < 1 {
		p.addf("storage.backup.keep", "must be at least 1, got %d", c.Storage.Backup.Keep)
	}
	if c.Storage.GCInterval != 0 && c.Storage.GCInterval < time.Minute {
		p.addf("storage.gc_interval", "must be 0 (never) or at least 1m, got %s", c.Storage.GCInterval)
	}
	if c.Webhooks.Retention != 0 && c.Webhooks.Retention < time.Hour {
		p.addf("webhooks.retention", "must be 0 (keep forever) or at least 1h, got %s", c.Webhooks.Retention)
	}
	if c.Audit.Retention != 0 && c.Audit.Retention < 24*time.Hour {
		p.addf("audit.retention", "must be 0 (keep forever) or at least 24h, got %s", c.Audit.Retention)
	}
	if n := c.Audit.CheckpointEvery; n < 1 || n > 1_000_000 {
		p.addf("audit.checkpoint_every", "must be from 1 to 1000000, got %d", n)
	}
	if c.Audit.CheckpointInterval < time.Second {
		p.addf("audit.checkpoint_interval", "must be at least 1s, got %s", c.Audit.CheckpointInterval)
	}
	if c.Storage.MaxRecordBytes < MinRecordBytes || c.Storage.MaxRecordBytes > MaxRecordBytesLimit {
		p.addf("storage.max_record_bytes", "must be from %d to %d, got %d", MinRecordBytes, MaxRecordBytesLimit, c.Storage.MaxRecordBytes)
	}

	// auth
	if c.Auth.JWKSURL == "" {
		if !c.Auth.BuiltinIssuer {
			p.addf("auth.jwks_url", "required unless auth.builtin_issuer is on")
		}
	} else {
		checkJWKSURL(&p, "auth.jwks_url", c.Auth.JWKSURL)
	}
	if strings.TrimSpace(c.Auth.Issuer) == "" {
		p.addf("auth.issuer", "required")
	}
	if strings.TrimSpace(c.Auth.Audience) == "" {
		p.addf("auth.audience", "required")
	}
	checkEnum(&p, "auth.scope_claim", c.Auth.ScopeClaim, "scope", "scp", "permissions")
	checkRange(&p, "auth.leeway", c.Auth.Leeway, 0, 5*time.Minute)
	checkRange(&p, "auth.token_ttl", c.Auth.TokenTTL, time.Minute, 24*time.Hour)
	if c.Auth.JWKSRefresh < time.Minute {
		p.addf("auth.jwks_refresh", "must be at least 1m, got %s", c.Auth.JWKSRefresh)
	}

	// log
	checkEnum(&p, "log.level", c.Log.Level, "debug", "info", "warn", "error")
	checkEnum(&p, "log.format", c.Log.Format, "json", "text")

	// webhooks
	if w := c.Webhooks.Workers; w < 1 || w > 256 {
		p.addf("webhooks.workers", "must be between 1 and 256, got %d", w)
	}
	checkPositive(&p, "webhooks.timeout", c.Webhooks.Timeout)
	if l := c.Webhooks.Lease; l != 0 && l < 3*time.Second {
		p.addf("webhooks.lease", "must be 0 (twice webhooks.timeout plus a minute) or at least 3s, got %s", l)
	}
	if n := c.Webhooks.MaxAttempts; n < 1 || n > 100 {
		p.addf("webhooks.max_attempts", "must be between 1 and 100, got %d", n)
	}
	checkPositive(&p, "webhooks.backoff_base", c.Webhooks.BackoffBase)
	if c.Webhooks.BackoffMax < c.Webhooks.BackoffBase {
		p.addf("webhooks.backoff_max", "must be at least webhooks.backoff_base (%s), got %s",
			c.Webhooks.BackoffBase, c.Webhooks.BackoffMax)
	}
	checkPositive(&p, "admin.console_session_ttl", c.Admin.ConsoleSessionTTL)
	for _, h := range c.Admin.AllowedHosts {
		checkHostName(&p, "admin.allowed_hosts", h)
	}
	if n := c.Admin.KeyFailureBurst; n < 0 || n > MaxKeyFailureBurst {
		p.addf("admin.key_failure_burst", "must be from 0 (no limit) to %d, got %d", MaxKeyFailureBurst, n)
	}
	if c.Admin.KeyFailureBurst > 0 {
		checkRange(&p, "admin.key_failure_interval", c.Admin.KeyFailureInterval, time.Second, 24*time.Hour)
	}
	if c.Webhooks.RotationGrace < 0 {
		p.addf("webhooks.rotation_grace", "must not be negative, got %s", c.Webhooks.RotationGrace)
	}
	if d := c.Webhooks.DisableAfter; d != 0 && d < time.Minute {
		p.addf("webhooks.disable_after", "must be 0 (never disable) or at least 1m, got %s", d)
	}
	if n := c.Webhooks.RecoverRate; n < 1 || n > 10_000 {
		p.addf("webhooks.recover_rate", "must be between 1 and 10000, got %d", n)
	}
	if u := c.Webhooks.OperatorURL; u != "" {
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			p.addf("webhooks.operator_url", "must be an absolute http or https URL")
		}
		if c.Webhooks.OperatorSecret == "" {
			p.addf("webhooks.operator_secret", "required with webhooks.operator_url")
		}
	}
	for _, n := range c.Webhooks.AllowedNetworks {
		if _, err := parseNetwork(n); err != nil {
			p.addf("webhooks.allowed_networks", "%v", err)
		}
	}
	if f := c.Webhooks.CAFile; f != "" {
		info, err := os.Stat(f)
		switch {
		case err != nil:
			p.addf("webhooks.ca_file", "%v", err)
		case !info.Mode().IsRegular():
			p.addf("webhooks.ca_file", "%s is not a regular file", f)
		}
	}

	return p
}

// AllowedPrefixes are webhooks.allowed_networks parsed; entries that do
// not parse (which Validate reports) are left out.
func (w Webhooks) AllowedPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, n := range w.AllowedNetworks {
		if p, err := parseNetwork(n); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// parseNetwork reads one webhooks.allowed_networks entry: a network in
// CIDR notation, written as its first address, in the form deliveries
// dial (an IPv4 network in its IPv4 form, which IPv4-mapped IPv6 addresses
// are judged as).
func parseNetwork(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	switch {
	case err != nil:
		return netip.Prefix{}, fmt.Errorf("must be a network in CIDR notation such as 10.20.0.0/16 or fd00:1234::/32, got %q", s)
	case p != p.Masked():
		return netip.Prefix{}, fmt.Errorf("must be written as its network address (%s), got %q", p.Masked(), s)
	case p.Addr().Is4In6():
		return netip.Prefix{}, fmt.Errorf("must be written in its IPv4 form, got %q", s)
	}
	return p, nil
}

// checkListen requires host:port with a numeric port; port 0 means any free
// port and an empty host means all interfaces.
func checkListen(p *problems, key, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.addf(key, "must be host:port, got %q", addr)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		p.addf(key, "port must be a number from 0 to 65535, got %q", port)
	}
}

// sameAddr reports whether two valid listen addresses would collide. Port 0
// never collides; a wildcard host collides with every host.
func sameAddr(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil || pa != pb {
		return false
	}
	if n, err := strconv.ParseUint(pa, 10, 16); err != nil || n == 0 {
		return false
	}
	wildcard := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wildcard(ha) || wildcard(hb)
}

// checkHostName requires a DNS host name as a Host header names it: no
// scheme, port, path or wildcard; labels of letters, digits, hyphens and
// underscores (which container and compose service names use), a trailing
// dot allowed. An IP literal is accepted too, though the operator listener
// answers every IP literal anyway.
func checkHostName(p *problems, key, h string) {
	name := strings.TrimSuffix(h, ".")
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")); err == nil {
		return
	}
	switch {
	case h == "":
		p.addf(key, "must not hold an empty name")
		return
	case strings.Contains(h, "/"):
		p.addf(key, "must hold host names without a scheme or path, got %q", h)
		return
	case strings.Contains(h, ":"):
		p.addf(key, "must hold host names without a port (any port is accepted), got %q", h)
		return
	case len(name) > 253:
		p.addf(key, "must hold host names of at most 253 characters, got %d", len(name))
		return
	}
	for _, label := range strings.Split(name, ".") {
		ok := label != "" && len(label) <= 63
		for _, r := range label {
			ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
		}
		if !ok {
			p.addf(key, "must hold host names (letters, digits, '-' and '_' between dots; no wildcard), got %q", h)
			return
		}
	}
}

// checkBasePath accepts "" (root) or a clean absolute path without trailing
// slash, query or fragment.
func checkBasePath(p *problems, key, bp string) {
	switch {
	case bp == "":
	case !strings.HasPrefix(bp, "/"):
		p.addf(key, "must start with \"/\" (or be empty for the root), got %q", bp)
	case bp == "/" || strings.HasSuffix(bp, "/"):
		p.addf(key, "must not end with \"/\" (use \"\" for the root), got %q", bp)
	case strings.ContainsAny(bp, "?#") || strings.ContainsFunc(bp, unicode.IsSpace):
		p.addf(key, "must be a plain path without query, fragment or spaces, got %q", bp)
	case path.Clean(bp) != bp:
		p.addf(key, "must be a clean path (no \"//\", \".\" or \"..\" segments), got %q", bp)
	}
}

// parseHTTPURL returns the URL if raw is an absolute http or https URL with a
// host, or records a problem and returns nil.
func parseHTTPURL(p *problems, key, raw string) *url.URL {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.addf(key, "must be an absolute http(s) URL, got %q", raw)
		return nil
	}
	return u
}

// checkHTTPURL requires an absolute http(s) URL.
func checkHTTPURL(p *problems, key, raw string) {
	parseHTTPURL(p, key, raw)
}

// checkJWKSURL requires an https URL, or plain http to a loopback host
// (127.0.0.0/8, ::1, localhost) for development and tests. Whoever can
// change the key set can forge a token for any user, so the keys must
// not cross a network in the clear. The message names the host only: the
// URL's query may carry a credential of the identity provider.
func checkJWKSURL(p *problems, key, raw string) {
	u := parseHTTPURL(p, key, raw)
	if u == nil || u.Scheme == "https" || isLoopbackHost(u.Hostname()) {
		return
	}
	p.addf(key, "must be an https URL (plain http is allowed only to a loopback host: 127.0.0.0/8, ::1 or localhost), got http://%s", u.Host)
}

// isLoopbackHost reports whether host is localhost or a loopback IP
// address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkBaseURL requires an absolute http(s) URL that paths can be appended
// to: no trailing slash, query or fragment.
func checkBaseURL(p *problems, key, raw string) {
	u := parseHTTPURL(p, key, raw)
	switch {
	case u == nil:
	case strings.HasSuffix(raw, "/"):
		p.addf(key, "must not end with \"/\", got %q", raw)
	case u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(raw, "?#"):
		p.addf(key, "must not have a query or fragment, got %q", raw)
	}
}

func checkEnum(p *problems, key, val string, allowed ...string) {
	if !slices.Contains(allowed, val) {
		p.addf(key, "must be one of %s, got %q", strings.Join(allowed, ", "), val)
	}
}

// checkPostgresTimeouts checks the storage.postgres timeouts: each 0 or
// within its bounds, and a lock timeout no longer than the statement
// timeout (the statement would be cancelled first).
func checkPostgresTimeouts(p *problems, pg Postgres) {
	for _, t := range []struct {
		key string
		d   time.Duration
		min time.Duration
	}{
		{"storage.postgres.statement_timeout", pg.StatementTimeout, time.Second},
		{"storage.postgres.lock_timeout", pg.LockTimeout, 100 * time.Millisecond},
		{"storage.postgres.idle_in_transaction_timeout", pg.IdleInTransactionTimeout, time.Second},
		// Keepalives count in whole seconds: below 10s the probes could
		// not be spread over the timeout.
		{"storage.postgres.network_timeout", pg.NetworkTimeout, 10 * time.Second},
	} {
		if t.d != 0 && (t.d < t.min || t.d > time.Hour) {
			p.addf(t.key, "must be 0 (off) or between %s and 1h, got %s", fmtDur(t.min), t.d)
		}
	}
	if pg.StatementTimeout > 0 && pg.LockTimeout > pg.StatementTimeout {
		p.addf("storage.postgres.lock_timeout", "must not be longer than storage.postgres.statement_timeout (%s), got %s", pg.StatementTimeout, pg.LockTimeout)
	}
}

func checkPositive(p *problems, key string, d time.Duration) {
	if d <= 0 {
		p.addf(key, "must be greater than 0, got %s", d)
	}
}

func checkRange(p *problems, key string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		p.addf(key, "must be between %s and %s, got %s", fmtDur(lo), fmtDur(hi), d)
	}
}

// fmtDur prints whole minutes and hours without trailing zero units
// ("5m", "24h" rather than "5m0s", "24h0m0s").
func fmtDur(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
