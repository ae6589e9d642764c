package config_test

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/structs"
	"github.com/knadh/koanf/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
)

const examplePath = "../config.example.yaml"

// validConfig returns Defaults made valid with the fewest changes.
func validConfig(t testing.TB) *config.Config {
	t.Helper()
	c := config.Defaults()
	c.Storage.InMemory = true
	c.Auth.BuiltinIssuer = true
	return c
}

// writeFile writes content to a fresh file under t.TempDir and returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// requireProblems asserts that err has exactly one line per key, each line
// starting with "config: <key>:".
func requireProblems(t testing.TB, err error, keys ...string) {
	t.Helper()
	if len(keys) == 0 {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	for _, line := range lines {
		assert.True(t, strings.HasPrefix(line, "config: "), "line %q lacks the config: prefix", line)
	}
	for _, key := range keys {
		assert.Contains(t, err.Error(), "config: "+key+": ")
	}
	assert.Len(t, lines, len(keys), "one line per problem:\n%s", err)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mutate  func(*config.Config)
		wantErr []string
	}{
		{
			name:    "defaults alone need storage and a key source",
			mutate:  func(*config.Config) {},
			wantErr: []string{"storage.dir", "auth.jwks_url"},
		},
		{
			name: "in-memory storage and builtin issuer",
			mutate: func(c *config.Config) {
				c.Storage.InMemory = true
				c.Auth.BuiltinIssuer = true
			},
		},
		{
			name: "storage dir and external JWKS",
			mutate: func(c *config.Config) {
				c.Storage.Dir = t.TempDir()
				c.Auth.JWKSURL = "https://idp.example.org/.well-known/jwks.json"
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := config.Defaults()
			tt.mutate(c)
			requireProblems(t, c.Validate(), tt.wantErr...)
		})
	}
}

// TestPostgresListenDefault: the LISTEN connection is on unless
// storage.postgres.listen says false (for a pooler in transaction mode).
func TestPostgresListenDefault(t *testing.T) {
	t.Parallel()
	require.True(t, config.Defaults().Storage.Postgres.Listen)
	off := "storage:\n  postgres:\n    listen: false\n"
	c, err := config.Load(config.Options{Path: writeFile(t, "rxgate.yaml", off)})
	require.NoError(t, err)
	require.False(t, c.Storage.Postgres.Listen)
}

func TestDefaultsAreFresh(t *testing.T) {
	t.Parallel()
	a := config.Defaults()
	a.HTTP.Listen = "changed"
	assert.Equal(t, "127.0.0.1:8080", config.Defaults().HTTP.Listen)
}

func TestLoadPrecedence(t *testing.T) {
	t.Parallel()
	const fileYAML = "http:\n  listen: \"127.0.0.1:1111\"\nwebhooks:\n  workers: 5\n"
	env := []string{"RXGATE_HTTP__LISTEN=127.0.0.1:2222", "RXGATE_WEBHOOKS__WORKERS=6"}
	flags := map[string]any{"http.listen": "127.0.0.1:3333", "webhooks.workers": 7}

	tests := []struct {
		name        string
		file        bool
		env         bool
		flags       bool
		wantListen  string
		wantWorkers int
	}{
		{name: "defaults only", wantListen: "127.0.0.1:8080", wantWorkers: 16},
		{name: "file beats defaults", file: true, wantListen: "127.0.0.1:1111", wantWorkers: 5},
		{name: "env beats file", file: true, env: true, wantListen: "127.0.0.1:2222", wantWorkers: 6},
		{name: "flags beat env", file: true, env: true, flags: true, wantListen: "127.0.0.1:3333", wantWorkers: 7},
		{name: "env beats defaults without file", env: true, wantListen: "127.0.0.1:2222", wantWorkers: 6},
		{name: "flags beat file", file: true, flags: true, wantListen: "127.0.0.1:3333", wantWorkers: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var opts config.Options
			if tt.file {
				opts.Path = writeFile(t, "rxgate.yaml", fileYAML)
			}
			if tt.env {
				opts.Environ = env
			}
			if tt.flags {
				opts.Flags = flags
			}
			c, err := config.Load(opts)
			require.NoError(t, err)
			assert.Equal(t, tt.wantListen, c.HTTP.Listen)
			assert.Equal(t, tt.wantWorkers, c.Webhooks.Workers)
			// Keys set in no layer keep their defaults.
			assert.Equal(t, config.Defaults().Admin, c.Admin)
		})
	}
}

func TestLoadEnvironment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ []string
		want    func(*config.Config)
	}{
		{
			name:    "double underscore separates levels",
			environ: []string{"RXGATE_ADMIN__API_KEY=0123456789abcdef-secret"},
			want:    func(c *config.Config) { c.Admin.APIKey = "0123456789abcdef-secret" },
		},
		{
			name:    "single underscores stay in the key",
			environ: []string{"RXGATE_HTTP__BASE_PATH=/api"},
			want:    func(c *config.Config) { c.HTTP.BasePath = "/api" },
		},
		{
			name:    "empty value is an explicit empty string",
			environ: []string{"RXGATE_HTTP__BASE_PATH="},
			want:    func(c *config.Config) { c.HTTP.BasePath = "" },
		},
		{
			name:    "value may contain equals signs",
			environ: []string{"RXGATE_AUTH__JWKS_URL=https://idp.example.org/jwks?a=b"},
			want:    func(c *config.Config) { c.Auth.JWKSURL = "https://idp.example.org/jwks?a=b" },
		},
		{
			name:    "bool",
			environ: []string{"RXGATE_STORAGE__IN_MEMORY=true", "RXGATE_WEBHOOKS__ALLOW_INSECURE_LOOPBACK=1"},
			want: func(c *config.Config) {
				c.Storage.InMemory = true
				c.Webhooks.AllowInsecureLoopback = true
			},
		},
		{
			name:    "int and int64",
			environ: []string{"RXGATE_WEBHOOKS__WORKERS=8", "RXGATE_HTTP__MAX_BODY_BYTES=1024"},
			want: func(c *config.Config) {
				c.Webhooks.Workers = 8
				c.HTTP.MaxBodyBytes = 1024
			},
		},
		{
			name:    "durations",
			environ: []string{"RXGATE_WEBHOOKS__TIMEOUT=10s", "RXGATE_AUTH__TOKEN_TTL=2h30m", "RXGATE_AUTH__LEEWAY=0"},
			want: func(c *config.Config) {
				c.Webhooks.Timeout = 10 * time.Second
				c.Auth.TokenTTL = 150 * time.Minute
				c.Auth.Leeway = 0
			},
		},
		{
			name: "postgres timeouts",
			environ: []string{"RXGATE_STORAGE__POSTGRES__STATEMENT_TIMEOUT=5s", "RXGATE_STORAGE__POSTGRES__LOCK_TIMEOUT=500ms",
				"RXGATE_STORAGE__POSTGRES__IDLE_IN_TRANSACTION_TIMEOUT=0", "RXGATE_STORAGE__POSTGRES__NETWORK_TIMEOUT=1m"},
			want: func(c *config.Config) {
				pg := &c.Storage.Postgres
				pg.StatementTimeout, pg.LockTimeout, pg.IdleInTransactionTimeout, pg.NetworkTimeout = 5*time.Second, 500*time.Millisecond, 0, time.Minute
			},
		},
		{
			name:    "postgres replica id",
			environ: []string{"RXGATE_STORAGE__POSTGRES__REPLICA_ID=rxgate-2"},
			want:    func(c *config.Config) { c.Storage.Postgres.ReplicaID = "rxgate-2" },
		},
		{
			name:    "postgres listen off",
			environ: []string{"RXGATE_STORAGE__POSTGRES__LISTEN=false"},
			want:    func(c *config.Config) { c.Storage.Postgres.Listen = false },
		},
		{
			name:    "a list is comma-separated",
			environ: []string{"RXGATE_WEBHOOKS__ALLOWED_NETWORKS=10.20.0.0/16,fd00:1234::/32"},
			want:    func(c *config.Config) { c.Webhooks.AllowedNetworks = []string{"10.20.0.0/16", "fd00:1234::/32"} },
		},
		{
			name:    "a list of one",
			environ: []string{"RXGATE_WEBHOOKS__ALLOWED_NETWORKS=10.20.0.0/16"},
			want:    func(c *config.Config) { c.Webhooks.AllowedNetworks = []string{"10.20.0.0/16"} },
		},
		{
			name:    "a host list is comma-separated",
			environ: []string{"RXGATE_ADMIN__ALLOWED_HOSTS=rx.example.org,rxgate-admin"},
			want:    func(c *config.Config) { c.Admin.AllowedHosts = []string{"rx.example.org", "rxgate-admin"} },
		},
		{
			name:    "an empty list",
			environ: []string{"RXGATE_ADMIN__ALLOWED_HOSTS="},
			want:    func(*config.Config) {},
		},
		{
			name:    "other variables are ignored",
			environ: []string{"PATH=/usr/bin", "rxgate_http__listen=x", "XRXGATE_HTTP__LISTEN=x", "RXGATE_=x", "NOEQUALS"},
			want:    func(*config.Config) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := config.Load(config.Options{Environ: tt.environ})
			require.NoError(t, err)
			want := config.Defaults()
			tt.want(want)
			assert.Equal(t, want, got)
		})
	}
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		yaml string
		want func(*config.Config)
	}{
		{
			name: "empty file keeps defaults",
			yaml: "",
			want: func(*config.Config) {},
		},
		{
			name: "null value keeps the default",
			yaml: "http:\n  base_path:\n",
			want: func(*config.Config) {},
		},
		{
			name: "null and empty sections keep defaults",
			yaml: "http:\nadmin: {}\n",
			want: func(*config.Config) {},
		},
		{
			name: "explicit empty string mounts at the root",
			yaml: "http:\n  base_path: \"\"\n",
			want: func(c *config.Config) { c.HTTP.BasePath = "" },
		},
		{
			name: "a list",
			yaml: "admin:\n  allowed_hosts: [rx.example.org, rxgate-admin]\n",
			want: func(c *config.Config) { c.Admin.AllowedHosts = []string{"rx.example.org", "rxgate-admin"} },
		},
		{
			name: "typed values",
			yaml: "storage:\n  in_memory: true\nhttp:\n  max_body_bytes: 1048576\n  read_timeout: 2m\nauth:\n  leeway: 0\n",
			want: func(c *config.Config) {
				c.Storage.InMemory = true
				c.HTTP.MaxBodyBytes = 1 << 20
				c.HTTP.ReadTimeout = 2 * time.Minute
				c.Auth.Leeway = 0
			},
		},
		{
			name: "a list",
			yaml: "webhooks:\n  allowed_networks: [\"10.20.0.0/16\", \"192.168.7.0/24\"]\n",
			want: func(c *config.Config) { c.Webhooks.AllowedNetworks = []string{"10.20.0.0/16", "192.168.7.0/24"} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := config.Load(config.Options{Path: writeFile(t, "rxgate.yaml", tt.yaml)})
			require.NoError(t, err)
			want := config.Defaults()
			tt.want(want)
			assert.Equal(t, want, got)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		yaml    *string // nil: no file
		path    string  // used instead of yaml when set
		environ []string
		flags   map[string]any
		want    []string // substrings of the error
	}{
		{
			name: "unknown key in file",
			yaml: ptr("http:\n  lisen: \"127.0.0.1:9\"\n"),
			want: []string{`config: unknown key "http.lisen"`, "rxgate.yaml"},
		},
		{
			name: "unknown section in file",
			yaml: ptr("htp:\n  listen: x\n"),
			want: []string{`config: unknown key "htp.listen"`},
		},
		{
			name: "wrong case in file",
			yaml: ptr("HTTP:\n  Listen: x\n"),
			want: []string{`config: unknown key "HTTP.Listen"`},
		},
		{
			name: "nested below a leaf",
			yaml: ptr("http:\n  listen:\n    host: x\n"),
			want: []string{`config: unknown key "http.listen.host"`},
		},
		{
			name: "scalar for a section",
			yaml: ptr("http: on\n"),
			want: []string{"config: http: must be a mapping"},
		},
		{
			name:    "unknown env variable",
			environ: []string{"RXGATE_HTTP__LISEN=127.0.0.1:9"},
			want:    []string{`config: unknown key "http.lisen"`, "RXGATE_HTTP__LISEN"},
		},
		{
			name:    "single underscore between levels",
			environ: []string{"RXGATE_HTTP_LISTEN=127.0.0.1:9"},
			want:    []string{`config: unknown key "http_listen"`, "RXGATE_HTTP_LISTEN"},
		},
		{
			name:  "unknown flag",
			flags: map[string]any{"http.lisen": "x"},
			want:  []string{`config: unknown key "http.lisen" (from flags)`},
		},
		{
			name: "bad duration in file",
			yaml: ptr("http:\n  read_timeout: abc\n"),
			want: []string{"config: http.read_timeout: ", `"abc"`, "rxgate.yaml"},
		},
		{
			name: "bare number duration",
			yaml: ptr("webhooks:\n  timeout: 10\n"),
			want: []string{"config: webhooks.timeout: ", "unit"},
		},
		{
			name:    "bad duration in env",
			environ: []string{"RXGATE_AUTH__LEEWAY=soon"},
			want:    []string{"config: auth.leeway: ", `"soon"`, "RXGATE_AUTH__LEEWAY"},
		},
		{
			name:    "bad int in env",
			environ: []string{"RXGATE_WEBHOOKS__WORKERS=many"},
			want:    []string{"config: webhooks.workers: ", "RXGATE_WEBHOOKS__WORKERS"},
		},
		{
			name:    "bad bool in env",
			environ: []string{"RXGATE_STORAGE__IN_MEMORY=perhaps"},
			want:    []string{"config: storage.in_memory: "},
		},
		{
			name:    "every problem at once",
			yaml:    ptr("http:\n  lisen: x\n  write_timeout: never\n"),
			environ: []string{"RXGATE_LOG__LEVL=debug", "RXGATE_AUTH__LEEWAY=soon"},
			want: []string{
				`config: unknown key "http.lisen"`,
				`config: unknown key "log.levl"`,
				"config: http.write_timeout: ",
				"config: auth.leeway: ",
			},
		},
		{
			name: "missing file",
			path: filepath.Join(os.TempDir(), "rxgate-does-not-exist", "rxgate.yaml"),
			want: []string{"rxgate-does-not-exist", "does not exist"},
		},
		{
			name: "invalid YAML",
			yaml: ptr("http: [\n"),
			want: []string{"config: parse ", "rxgate.yaml"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := config.Options{Path: tt.path, Environ: tt.environ, Flags: tt.flags}
			if tt.yaml != nil {
				opts.Path = writeFile(t, "rxgate.yaml", *tt.yaml)
			}
			c, err := config.Load(opts)
			require.Error(t, err)
			assert.Nil(t, c)
			for _, s := range tt.want {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	caFile := writeFile(t, "ca.pem", "not checked here")
	tests := []struct {
		name    string
		mutate  func(*config.Config)
		wantErr []string // keys; empty means valid
	}{
		{name: "valid", mutate: func(*config.Config) {}},
		{name: "listen without port", mutate: func(c *config.Config) { c.HTTP.Listen = "127.0.0.1" }, wantErr: []string{"http.listen"}},
		{name: "listen with named port", mutate: func(c *config.Config) { c.HTTP.Listen = "127.0.0.1:http" }, wantErr: []string{"http.listen"}},
		{name: "listen port out of range", mutate: func(c *config.Config) { c.Admin.Listen = ":70000" }, wantErr: []string{"admin.listen"}},
		{name: "listen port 0 and empty host", mutate: func(c *config.Config) { c.HTTP.Listen = ":0"; c.Admin.Listen = "[::1]:0" }},
		{name: "admin on the http address", mutate: func(c *config.Config) { c.Admin.Listen = c.HTTP.Listen }, wantErr: []string{"admin.listen"}},
		{name: "admin port clashes with wildcard", mutate: func(c *config.Config) { c.HTTP.Listen = ":9000"; c.Admin.Listen = "127.0.0.1:9000" }, wantErr: []string{"admin.listen"}},
		{name: "same port on different hosts", mutate: func(c *config.Config) { c.HTTP.Listen = "127.0.0.1:9000"; c.Admin.Listen = "127.0.0.2:9000" }},
		{name: "root base path", mutate: func(c *config.Config) { c.HTTP.BasePath = "" }},
		{name: "nested base path", mutate: func(c *config.Config) { c.HTTP.BasePath = "/rx/external" }},
		{name: "base path slash", mutate: func(c *config.Config) { c.HTTP.BasePath = "/" }, wantErr: []string{"http.base_path"}},
		{name: "base path relative", mutate: func(c *config.Config) { c.HTTP.BasePath = "external" }, wantErr: []string{"http.base_path"}},
		{name: "base path trailing slash", mutate: func(c *config.Config) { c.HTTP.BasePath = "/external/" }, wantErr: []string{"http.base_path"}},
		{name: "base path not clean", mutate: func(c *config.Config) { c.HTTP.BasePath = "/a//b" }, wantErr: []string{"http.base_path"}},
		{name: "base path with query", mutate: func(c *config.Config) { c.HTTP.BasePath = "/a?b" }, wantErr: []string{"http.base_path"}},
		{name: "errors base empty", mutate: func(c *config.Config) { c.HTTP.ErrorsBase = "" }, wantErr: []string{"http.errors_base"}},
		{name: "errors base relative", mutate: func(c *config.Config) { c.HTTP.ErrorsBase = "/errors" }, wantErr: []string{"http.errors_base"}},
		{name: "errors base trailing slash", mutate: func(c *config.Config) { c.HTTP.ErrorsBase = "https://errors.rxgate.dev/" }, wantErr: []string{"http.errors_base"}},
		{name: "errors base ftp", mutate: func(c *config.Config) { c.HTTP.ErrorsBase = "ftp://errors.rxgate.dev" }, wantErr: []string{"http.errors_base"}},
		{name: "errors base with path", mutate: func(c *config.Config) { c.HTTP.ErrorsBase = "http://localhost:9/errors" }},
		{name: "public url", mutate: func(c *config.Config) { c.HTTP.PublicURL = "https://rx.example.org/external" }},
		{name: "public url trailing slash", mutate: func(c *config.Config) { c.HTTP.PublicURL = "https://rx.example.org/" }, wantErr: []string{"http.public_url"}},
		{name: "public url without scheme", mutate: func(c *config.Config) { c.HTTP.PublicURL = "rx.example.org" }, wantErr: []string{"http.public_url"}},
		{name: "max body zero", mutate: func(c *config.Config) { c.HTTP.MaxBodyBytes = 0 }, wantErr: []string{"http.max_body_bytes"}},
		{name: "max header bytes at the minimum", mutate: func(c *config.Config) { c.HTTP.MaxHeaderBytes = 4096 }},
		{name: "max header bytes under the minimum", mutate: func(c *config.Config) { c.HTTP.MaxHeaderBytes = 4095 }, wantErr: []string{"http.max_header_bytes"}},
		{name: "max connections one", mutate: func(c *config.Config) { c.HTTP.MaxConnections = 1 }},
		{name: "bulk drugs at the top", mutate: func(c *config.Config) { c.HTTP.MaxBulkDrugs = config.MaxBulkDrugsLimit }},
		{name: "bulk drugs over the top", mutate: func(c *config.Config) { c.HTTP.MaxBulkDrugs = config.MaxBulkDrugsLimit + 1 }, wantErr: []string{"http.max_bulk_drugs"}},
		{name: "bulk drugs zero", mutate: func(c *config.Config) { c.HTTP.MaxBulkDrugs = 0 }, wantErr: []string{"http.max_bulk_drugs"}},
		{name: "validation entries one", mutate: func(c *config.Config) { c.HTTP.MaxValidationEntries = 1 }},
		{name: "validation entries over the top", mutate: func(c *config.Config) { c.HTTP.MaxValidationEntries = config.MaxValidationEntriesLimit + 1 }, wantErr: []string{"http.max_validation_entries"}},
		{name: "record bytes at the minimum", mutate: func(c *config.Config) { c.Storage.MaxRecordBytes = config.MinRecordBytes }},
		{name: "record bytes under the minimum", mutate: func(c *config.Config) { c.Storage.MaxRecordBytes = config.MinRecordBytes - 1 }, wantErr: []string{"storage.max_record_bytes"}},
		{name: "record bytes at the top", mutate: func(c *config.Config) { c.Storage.MaxRecordBytes = config.MaxRecordBytesLimit }},
		{name: "record bytes over the top", mutate: func(c *config.Config) { c.Storage.MaxRecordBytes = config.MaxRecordBytesLimit + 1 }, wantErr: []string{"storage.max_record_bytes"}},
		{name: "retention forever", mutate: func(c *config.Config) { c.Webhooks.Retention = 0 }},
		{name: "retention under an hour", mutate: func(c *config.Config) { c.Webhooks.Retention = time.Minute }, wantErr: []string{"webhooks.retention"}},
		{name: "audit kept forever", mutate: func(c *config.Config) { c.Audit.Retention = 0 }},
		{name: "audit retention under a day", mutate: func(c *config.Config) { c.Audit.Retention = time.Hour }, wantErr: []string{"audit.retention"}},
		{name: "audit checkpoint every 0", mutate: func(c *config.Config) { c.Audit.CheckpointEvery = 0 }, wantErr: []string{"audit.checkpoint_every"}},
		{name: "audit checkpoint interval too short", mutate: func(c *config.Config) { c.Audit.CheckpointInterval = time.Millisecond }, wantErr: []string{"audit.checkpoint_interval"}},
		{name: "audit off", mutate: func(c *config.Config) { c.Audit.Enabled = false }},
		{name: "gc never", mutate: func(c *config.Config) { c.Storage.GCInterval = 0 }},
		{name: "gc too often", mutate: func(c *config.Config) { c.Storage.GCInterval = time.Second }, wantErr: []string{"storage.gc_interval"}},
		{name: "backups scheduled", mutate: func(c *config.Config) {
			c.Storage.Backup = config.Backup{Dir: "/backups", Interval: time.Hour, Keep: 3}
		}},
		{name: "backups without a dir", mutate: func(c *config.Config) { c.Storage.Backup.Interval = time.Hour }, wantErr: []string{"storage.backup.dir"}},
		{name: "backups too often", mutate: func(c *config.Config) { c.Storage.Backup = config.Backup{Dir: "/b", Interval: time.Second, Keep: 1} }, wantErr: []string{"storage.backup.interval"}},
		{name: "backups keep none", mutate: func(c *config.Config) { c.Storage.Backup.Keep = 0 }, wantErr: []string{"storage.backup.keep"}},
		{name: "max connections zero", mutate: func(c *config.Config) { c.HTTP.MaxConnections = 0 }, wantErr: []string{"http.max_connections"}},
		{
			name:    "header and idle timeouts zero",
			mutate:  func(c *config.Config) { c.HTTP.ReadHeaderTimeout, c.HTTP.IdleTimeout = 0, 0 },
			wantErr: []string{"http.read_header_timeout", "http.idle_timeout"},
		},
		{
			name: "timeouts zero",
			mutate: func(c *config.Config) {
				c.HTTP.ReadTimeout, c.HTTP.WriteTimeout, c.HTTP.ShutdownTimeout, c.Webhooks.Timeout = 0, 0, 0, 0
			},
			wantErr: []string{"http.read_timeout", "http.write_timeout", "http.shutdown_timeout", "webhooks.timeout"},
		},
		{name: "api key short", mutate: func(c *config.Config) { c.Admin.APIKey = "short" }, wantErr: []string{"admin.api_key"}},
		{name: "api key padded", mutate: func(c *config.Config) { c.Admin.APIKey = "0123456789abcdef\n" }, wantErr: []string{"admin.api_key"}},
		{name: "storage both", mutate: func(c *config.Config) { c.Storage.Dir = "/var/lib/rxgate" }, wantErr: []string{"storage.dir"}},
		{name: "storage neither", mutate: func(c *config.Config) { c.Storage.InMemory = false }, wantErr: []string{"storage.dir"}},
		{name: "jwks required without builtin issuer", mutate: func(c *config.Config) { c.Auth.BuiltinIssuer = false }, wantErr: []string{"auth.jwks_url"}},
		{name: "jwks url with builtin issuer", mutate: func(c *config.Config) { c.Auth.JWKSURL = "http://127.0.0.1:9/jwks.json" }},
		{name: "jwks url relative", mutate: func(c *config.Config) { c.Auth.JWKSURL = "/jwks.json" }, wantErr: []string{"auth.jwks_url"}},
		{name: "jwks url https", mutate: func(c *config.Config) {
			c.Auth.BuiltinIssuer, c.Auth.JWKSURL = false, "https://idp.example.org/jwks?key=x"
		}},
		{name: "jwks url plain http", mutate: func(c *config.Config) { c.Auth.JWKSURL = "http://idp.example.org/jwks.json" }, wantErr: []string{"auth.jwks_url"}},
		{name: "jwks url plain http to a private address", mutate: func(c *config.Config) { c.Auth.JWKSURL = "http://10.0.0.7/jwks.json" }, wantErr: []string{"auth.jwks_url"}},
		{name: "jwks url plain http to a name under localhost", mutate: func(c *config.Config) { c.Auth.JWKSURL = "http://localhost.example.org/jwks.json" }, wantErr: []string{"auth.jwks_url"}},
		{name: "jwks url plain http to 0.0.0.0", mutate: func(c *config.Config) { c.Auth.JWKSURL = "http://0.0.0.0:9/jwks.json" }, wantErr: []string{"auth.jwks_url"}},
		{name: "jwks url plain http to localhost", mutate: func(c *config.Config) { c.Auth.JWKSURL = "http://localhost:9/jwks.json" }},
		{name: "jwks url plain http to LOCALHOST", mutate: func(c *config.Config) { c.Auth.JWKSURL = "http://LOCALHOST/jwks.json" }},
		{name: "jwks url plain http to 127.0.0.0/8", mutate: func(c *config.Config) { c.Auth.JWKSURL = "http://127.1.2.3:9/jwks.json" }},
		{name: "jwks url plain http to ::1", mutate: func(c *config.Config) { c.Auth.JWKSURL = "http://[::1]:9/jwks.json" }},
		{name: "issuer and audience empty", mutate: func(c *config.Config) { c.Auth.Issuer = ""; c.Auth.Audience = " " }, wantErr: []string{"auth.issuer", "auth.audience"}},
		{name: "scope claim scp", mutate: func(c *config.Config) { c.Auth.ScopeClaim = "scp" }},
		{name: "scope claim permissions", mutate: func(c *config.Config) { c.Auth.ScopeClaim = "permissions" }},
		{name: "scope claim unknown", mutate: func(c *config.Config) { c.Auth.ScopeClaim = "roles" }, wantErr: []string{"auth.scope_claim"}},
		{name: "leeway bounds", mutate: func(c *config.Config) { c.Auth.Leeway = 0 }},
		{name: "leeway too long", mutate: func(c *config.Config) { c.Auth.Leeway = 6 * time.Minute }, wantErr: []string{"auth.leeway"}},
		{name: "leeway negative", mutate: func(c *config.Config) { c.Auth.Leeway = -time.Second }, wantErr: []string{"auth.leeway"}},
		{name: "token ttl too short", mutate: func(c *config.Config) { c.Auth.TokenTTL = 30 * time.Second }, wantErr: []string{"auth.token_ttl"}},
		{name: "token ttl too long", mutate: func(c *config.Config) { c.Auth.TokenTTL = 25 * time.Hour }, wantErr: []string{"auth.token_ttl"}},
		{name: "token ttl at the bounds", mutate: func(c *config.Config) { c.Auth.TokenTTL = 24 * time.Hour }},
		{name: "jwks refresh too short", mutate: func(c *config.Config) { c.Auth.JWKSRefresh = 30 * time.Second }, wantErr: []string{"auth.jwks_refresh"}},
		{name: "log level", mutate: func(c *config.Config) { c.Log.Level = "verbose" }, wantErr: []string{"log.level"}},
		{name: "log format", mutate: func(c *config.Config) { c.Log.Format = "xml" }, wantErr: []string{"log.format"}},
		{name: "log text debug", mutate: func(c *config.Config) { c.Log.Level, c.Log.Format = "debug", "text" }},
		{name: "workers zero", mutate: func(c *config.Config) { c.Webhooks.Workers = 0 }, wantErr: []string{"webhooks.workers"}},
		{name: "workers too many", mutate: func(c *config.Config) { c.Webhooks.Workers = 257 }, wantErr: []string{"webhooks.workers"}},
		{name: "workers at the bounds", mutate: func(c *config.Config) { c.Webhooks.Workers = 256; c.Webhooks.MaxAttempts = 100 }},
		{name: "max attempts zero", mutate: func(c *config.Config) { c.Webhooks.MaxAttempts = 0 }, wantErr: []string{"webhooks.max_attempts"}},
		{name: "max attempts too many", mutate: func(c *config.Config) { c.Webhooks.MaxAttempts = 101 }, wantErr: []string{"webhooks.max_attempts"}},
		{name: "backoff base zero", mutate: func(c *config.Config) { c.Webhooks.BackoffBase = 0; c.Webhooks.BackoffMax = 0 }, wantErr: []string{"webhooks.backoff_base"}},
		{name: "backoff max below base", mutate: func(c *config.Config) { c.Webhooks.BackoffMax = 500 * time.Millisecond }, wantErr: []string{"webhooks.backoff_max"}},
		{name: "backoff max equals base", mutate: func(c *config.Config) { c.Webhooks.BackoffMax = c.Webhooks.BackoffBase }},
		{name: "lease short", mutate: func(c *config.Config) { c.Webhooks.Lease = time.Second }, wantErr: []string{"webhooks.lease"}},
		{name: "lease set", mutate: func(c *config.Config) { c.Webhooks.Lease = 5 * time.Second }},
		{name: "unknown driver", mutate: func(c *config.Config) { c.Storage.Driver = "mysql" }, wantErr: []string{"storage.driver"}},
		{name: "postgres", mutate: func(c *config.Config) {
			c.Storage.Driver, c.Storage.Dir, c.Storage.InMemory = config.DriverPostgres, "", false
			c.Storage.Postgres.URL = "postgres://rxgate@db:5432/rxgate"
		}},
		{name: "postgres without url", mutate: func(c *config.Config) {
			c.Storage.Driver, c.Storage.Dir, c.Storage.InMemory = config.DriverPostgres, "", false
		}, wantErr: []string{"storage.postgres.url"}},
		{name: "postgres with badger settings", mutate: func(c *config.Config) {
			c.Storage.Driver, c.Storage.Dir, c.Storage.InMemory = config.DriverPostgres, "/var/lib/rxgate", true
			c.Storage.Postgres.URL = "postgres://rxgate@db:5432/rxgate"
			c.Storage.EncryptionKeyFile, c.Storage.Backup.Interval, c.Storage.Backup.Dir = "/k", time.Hour, "/b"
		}, wantErr: []string{"storage.dir", "storage.in_memory", "storage.encryption_key_file", "storage.backup.interval"}},
		{name: "postgres with the journal's recovery switch", mutate: func(c *config.Config) {
			c.Storage.Driver, c.Storage.Dir, c.Storage.InMemory = config.DriverPostgres, "", false
			c.Storage.Postgres.URL = "postgres://rxgate@db:5432/rxgate"
			c.Storage.JournalSkipCorrupt = true
		}, wantErr: []string{"storage.journal_skip_corrupt"}},
		{name: "journal's recovery switch", mutate: func(c *config.Config) { c.Storage.JournalSkipCorrupt = true }},
		{name: "badger with syncwrites", mutate: func(c *config.Config) { c.Storage.Badger.Durability = config.DurabilitySyncWrites }},
		{name: "badger durability unknown", mutate: func(c *config.Config) { c.Storage.Badger.Durability = "fsync" }, wantErr: []string{"storage.badger.durability"}},
		{name: "badger durability empty", mutate: func(c *config.Config) { c.Storage.Badger.Durability = "" }, wantErr: []string{"storage.badger.durability"}},
		{name: "postgres with a badger durability", mutate: func(c *config.Config) {
			c.Storage.Driver, c.Storage.Dir, c.Storage.InMemory = config.DriverPostgres, "", false
			c.Storage.Postgres.URL = "postgres://rxgate@db:5432/rxgate"
			c.Storage.Badger.Durability = config.DurabilitySyncWrites
		}, wantErr: []string{"storage.badger.durability"}},
		{name: "postgres pool zero", mutate: func(c *config.Config) { c.Storage.Postgres.MaxConns = 0 }, wantErr: []string{"storage.postgres.max_conns"}},
		{name: "postgres connect timeout zero", mutate: func(c *config.Config) { c.Storage.Postgres.ConnectTimeout = 0 }, wantErr: []string{"storage.postgres.connect_timeout"}},
		{name: "postgres timeouts off", mutate: func(c *config.Config) {
			pg := &c.Storage.Postgres
			pg.StatementTimeout, pg.LockTimeout, pg.IdleInTransactionTimeout, pg.NetworkTimeout = 0, 0, 0, 0
		}},
		{name: "postgres timeouts at the lower bounds", mutate: func(c *config.Config) {
			pg := &c.Storage.Postgres
			pg.StatementTimeout, pg.LockTimeout, pg.IdleInTransactionTimeout, pg.NetworkTimeout = time.Second, 100*time.Millisecond, time.Second, 10*time.Second
		}},
		{name: "postgres timeouts at the upper bounds", mutate: func(c *config.Config) {
			pg := &c.Storage.Postgres
			pg.StatementTimeout, pg.LockTimeout, pg.IdleInTransactionTimeout, pg.NetworkTimeout = time.Hour, time.Hour, time.Hour, time.Hour
		}},
		{name: "postgres timeouts too short", mutate: func(c *config.Config) {
			pg := &c.Storage.Postgres
			pg.StatementTimeout, pg.LockTimeout, pg.IdleInTransactionTimeout, pg.NetworkTimeout = 999*time.Millisecond, 99*time.Millisecond, 999*time.Millisecond, 9*time.Second
		}, wantErr: []string{"storage.postgres.statement_timeout", "storage.postgres.lock_timeout", "storage.postgres.idle_in_transaction_timeout", "storage.postgres.network_timeout"}},
		{name: "postgres timeouts too long", mutate: func(c *config.Config) {
			pg := &c.Storage.Postgres
			pg.StatementTimeout, pg.IdleInTransactionTimeout, pg.NetworkTimeout = 61*time.Minute, 61*time.Minute, 61*time.Minute
		}, wantErr: []string{"storage.postgres.statement_timeout", "storage.postgres.idle_in_transaction_timeout", "storage.postgres.network_timeout"}},
		{name: "postgres timeouts negative", mutate: func(c *config.Config) {
			pg := &c.Storage.Postgres
			pg.StatementTimeout, pg.LockTimeout, pg.IdleInTransactionTimeout, pg.NetworkTimeout = -time.Second, -time.Second, -time.Second, -time.Second
		}, wantErr: []string{"storage.postgres.statement_timeout", "storage.postgres.lock_timeout", "storage.postgres.idle_in_transaction_timeout", "storage.postgres.network_timeout"}},
		{name: "postgres lock timeout longer than the statement timeout", mutate: func(c *config.Config) {
			c.Storage.Postgres.StatementTimeout, c.Storage.Postgres.LockTimeout = 5*time.Second, 6*time.Second
		}, wantErr: []string{"storage.postgres.lock_timeout"}},
		{name: "postgres lock timeout without a statement timeout", mutate: func(c *config.Config) {
			c.Storage.Postgres.StatementTimeout, c.Storage.Postgres.LockTimeout = 0, time.Hour
		}},
		{name: "postgres replica id", mutate: func(c *config.Config) { c.Storage.Postgres.ReplicaID = "rx-gate_2.eu-west" }},
		{name: "postgres replica id at its longest", mutate: func(c *config.Config) { c.Storage.Postgres.ReplicaID = strings.Repeat("r", 63) }},
		{name: "postgres replica id too long", mutate: func(c *config.Config) { c.Storage.Postgres.ReplicaID = strings.Repeat("r", 64) },
			wantErr: []string{"storage.postgres.replica_id"}},
		{name: "postgres replica id with a space", mutate: func(c *config.Config) { c.Storage.Postgres.ReplicaID = "rx gate" },
			wantErr: []string{"storage.postgres.replica_id"}},
		{name: "postgres replica id with a control character", mutate: func(c *config.Config) { c.Storage.Postgres.ReplicaID = "rx\ngate" },
			wantErr: []string{"storage.postgres.replica_id"}},
		{name: "postgres replica id not ascii", mutate: func(c *config.Config) { c.Storage.Postgres.ReplicaID = "réplica" },
			wantErr: []string{"storage.postgres.replica_id"}},
		{name: "console session ttl zero", mutate: func(c *config.Config) { c.Admin.ConsoleSessionTTL = 0 }, wantErr: []string{"admin.console_session_ttl"}},
		{name: "allowed hosts", mutate: func(c *config.Config) {
			c.Admin.AllowedHosts = []string{"rxgate-admin.internal", "RX.Example.org.", "rx_gate", "10.0.0.7", "[::1]"}
		}},
		{name: "allowed host with a port", mutate: func(c *config.Config) { c.Admin.AllowedHosts = []string{"rx.example.org:8081"} }, wantErr: []string{"admin.allowed_hosts"}},
		{name: "allowed host as a URL", mutate: func(c *config.Config) { c.Admin.AllowedHosts = []string{"https://rx.example.org"} }, wantErr: []string{"admin.allowed_hosts"}},
		{name: "allowed host wildcard", mutate: func(c *config.Config) { c.Admin.AllowedHosts = []string{"*.example.org"} }, wantErr: []string{"admin.allowed_hosts"}},
		{name: "allowed host empty", mutate: func(c *config.Config) { c.Admin.AllowedHosts = []string{""} }, wantErr: []string{"admin.allowed_hosts"}},
		{name: "allowed host empty label", mutate: func(c *config.Config) { c.Admin.AllowedHosts = []string{"rx..example.org"} }, wantErr: []string{"admin.allowed_hosts"}},
		{name: "allowed host with a space", mutate: func(c *config.Config) { c.Admin.AllowedHosts = []string{"rx example"} }, wantErr: []string{"admin.allowed_hosts"}},
		{name: "key failure limit off", mutate: func(c *config.Config) { c.Admin.KeyFailureBurst, c.Admin.KeyFailureInterval = 0, 0 }},
		{name: "key failure burst negative", mutate: func(c *config.Config) { c.Admin.KeyFailureBurst = -1 }, wantErr: []string{"admin.key_failure_burst"}},
		{name: "key failure burst over the top", mutate: func(c *config.Config) { c.Admin.KeyFailureBurst = config.MaxKeyFailureBurst + 1 }, wantErr: []string{"admin.key_failure_burst"}},
		{name: "key failure interval zero", mutate: func(c *config.Config) { c.Admin.KeyFailureInterval = 0 }, wantErr: []string{"admin.key_failure_interval"}},
		{name: "key failure interval over a day", mutate: func(c *config.Config) { c.Admin.KeyFailureInterval = 25 * time.Hour }, wantErr: []string{"admin.key_failure_interval"}},
		{name: "rotation grace zero", mutate: func(c *config.Config) { c.Webhooks.RotationGrace = 0 }},
		{name: "rotation grace negative", mutate: func(c *config.Config) { c.Webhooks.RotationGrace = -time.Hour }, wantErr: []string{"webhooks.rotation_grace"}},
		{name: "disable after off", mutate: func(c *config.Config) { c.Webhooks.DisableAfter = 0 }},
		{name: "disable after too short", mutate: func(c *config.Config) { c.Webhooks.DisableAfter = time.Second }, wantErr: []string{"webhooks.disable_after"}},
		{name: "recover rate zero", mutate: func(c *config.Config) { c.Webhooks.RecoverRate = 0 }, wantErr: []string{"webhooks.recover_rate"}},
		{name: "recover rate over the top", mutate: func(c *config.Config) { c.Webhooks.RecoverRate = 10_001 }, wantErr: []string{"webhooks.recover_rate"}},
		{name: "operator url", mutate: func(c *config.Config) {
			c.Webhooks.OperatorURL, c.Webhooks.OperatorSecret = "https://ops.example/hooks", "s"
		}},
		{name: "operator url without secret", mutate: func(c *config.Config) { c.Webhooks.OperatorURL = "https://ops.example/hooks" }, wantErr: []string{"webhooks.operator_secret"}},
		{name: "operator url relative", mutate: func(c *config.Config) { c.Webhooks.OperatorURL, c.Webhooks.OperatorSecret = "/hooks", "s" }, wantErr: []string{"webhooks.operator_url"}},
		{name: "allowed networks", mutate: func(c *config.Config) {
			c.Webhooks.AllowedNetworks = []string{"10.20.0.0/16", "192.168.7.5/32", "fd00:1234::/32", "127.0.0.1/32", " 172.16.0.0/12 "}
		}},
		{name: "allowed network not CIDR", mutate: func(c *config.Config) { c.Webhooks.AllowedNetworks = []string{"10.20.0.1"} }, wantErr: []string{"webhooks.allowed_networks"}},
		{name: "allowed network not an address", mutate: func(c *config.Config) { c.Webhooks.AllowedNetworks = []string{"intranet/8"} }, wantErr: []string{"webhooks.allowed_networks"}},
		{name: "allowed network with host bits", mutate: func(c *config.Config) { c.Webhooks.AllowedNetworks = []string{"10.20.3.4/16"} }, wantErr: []string{"webhooks.allowed_networks"}},
		{name: "allowed network IPv4-mapped", mutate: func(c *config.Config) { c.Webhooks.AllowedNetworks = []string{"::ffff:10.0.0.0/104"} }, wantErr: []string{"webhooks.allowed_networks"}},
		{name: "allowed network empty", mutate: func(c *config.Config) { c.Webhooks.AllowedNetworks = []string{""} }, wantErr: []string{"webhooks.allowed_networks"}},
		{name: "ca file exists", mutate: func(c *config.Config) { c.Webhooks.CAFile = caFile }},
		{name: "ca file missing", mutate: func(c *config.Config) { c.Webhooks.CAFile = caFile + ".missing" }, wantErr: []string{"webhooks.ca_file"}},
		{name: "ca file is a directory", mutate: func(c *config.Config) { c.Webhooks.CAFile = filepath.Dir(caFile) }, wantErr: []string{"webhooks.ca_file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig(t)
			tt.mutate(c)
			requireProblems(t, c.Validate(), tt.wantErr...)
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	c := config.Defaults() // no storage, no JWKS source
	c.HTTP.Listen = "nowhere"
	c.HTTP.BasePath = "external/"
	c.HTTP.ErrorsBase = "errors.rxgate.dev"
	c.Auth.ScopeClaim = "roles"
	c.Log.Level = "loud"
	c.Webhooks.Workers = 0
	c.Webhooks.BackoffMax = 0

	requireProblems(t, c.Validate(),
		"http.listen",
		"http.base_path",
		"http.errors_base",
		"storage.dir",
		"auth.jwks_url",
		"auth.scope_claim",
		"log.level",
		"webhooks.workers",
		"webhooks.backoff_max",
	)
	assert.Contains(t, c.Validate().Error(), "config: auth.jwks_url: required unless auth.builtin_issuer is on")
}

// TestValidateJWKSURLMessage checks that refusing a plain-http JWKS URL
// names the key and the rule, and leaves out the URL's query, which may
// hold a credential of the identity provider.
func TestValidateJWKSURLMessage(t *testing.T) {
	t.Parallel()
	c := validConfig(t)
	c.Auth.JWKSURL = "http://idp.example.org/jwks.json?client_secret=s3cr3t"
	err := c.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "config: auth.jwks_url: must be an https URL")
	assert.Contains(t, err.Error(), "idp.example.org")
	assert.NotContains(t, err.Error(), "s3cr3t")
}

func TestValidateServe(t *testing.T) {
	t.Parallel()
	const goodKey = "0123456789abcdef"
	tests := []struct {
		name         string
		mutate       func(*config.Config)
		wantServe    []string // keys ValidateServe reports
		wantValidate []string // keys Validate reports
		wantMsg      string
	}{
		{name: "key set", mutate: func(c *config.Config) { c.Admin.APIKey = goodKey }},
		{
			name:      "key empty",
			mutate:    func(*config.Config) {},
			wantServe: []string{"admin.api_key"},
			wantMsg:   "config: admin.api_key: required",
		},
		{
			name:         "key short",
			mutate:       func(c *config.Config) { c.Admin.APIKey = goodKey[1:] },
			wantServe:    []string{"admin.api_key"},
			wantValidate: []string{"admin.api_key"},
			wantMsg:      "at least 16 characters",
		},
		{
			name:         "includes Validate problems",
			mutate:       func(c *config.Config) { c.Storage.InMemory = false },
			wantServe:    []string{"storage.dir", "admin.api_key"},
			wantValidate: []string{"storage.dir"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig(t)
			tt.mutate(c)
			requireProblems(t, c.Validate(), tt.wantValidate...)
			err := c.ValidateServe()
			requireProblems(t, err, tt.wantServe...)
			if tt.wantMsg != "" {
				assert.Contains(t, err.Error(), tt.wantMsg)
			}
			if err != nil && c.Admin.APIKey != "" {
				assert.NotContains(t, err.Error(), c.Admin.APIKey, "errors must not echo the key")
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	t.Parallel()
	const secret = "super-secret-admin-key-0123456789"
	tests := []struct {
		name string
		key  string
		want string
	}{
		{name: "key set", key: secret, want: "REDACTED"},
		{name: "key empty", key: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig(t)
			c.Admin.APIKey = tt.key
			c.Admin.AllowedHosts = []string{"rx.example.org"}
			c.Storage.Postgres.URL = strings.Replace(tt.key, "super", "postgres://u:", 1)
			c.Webhooks.OperatorSecret = strings.Replace(tt.key, "admin", "operator", 1)
			r := c.Redacted()
			assert.Equal(t, tt.want, r.Admin.APIKey)
			assert.Equal(t, tt.want, r.Webhooks.OperatorSecret, "webhooks.operator_secret is a secret")
			assert.Equal(t, tt.want, r.Storage.Postgres.URL, "the database URL may hold a password")
			assert.Equal(t, tt.key, c.Admin.APIKey, "the original is untouched")
			if tt.key != "" {
				assert.NotContains(t, fmt.Sprintf("%+v", r), tt.key)
				assert.NotContains(t, fmt.Sprintf("%+v", r), c.Storage.Postgres.URL)
				assert.NotContains(t, fmt.Sprintf("%+v", r), c.Webhooks.OperatorSecret)
			}
			// Everything else is copied.
			r.Admin.APIKey, r.Storage.Postgres.URL = c.Admin.APIKey, c.Storage.Postgres.URL
			r.Webhooks.OperatorSecret = c.Webhooks.OperatorSecret
			assert.Equal(t, c, r)
			r.Admin.AllowedHosts[0] = "changed.example"
			assert.Equal(t, []string{"rx.example.org"}, c.Admin.AllowedHosts, "the copy shares no slice with the original")
		})
	}
}

func TestExampleFile(t *testing.T) {
	t.Parallel()

	t.Run("loads and passes ValidateServe", func(t *testing.T) {
		t.Parallel()
		c, err := config.Load(config.Options{Path: examplePath})
		require.NoError(t, err)
		require.NoError(t, c.ValidateServe())

		want := config.Defaults()
		want.Storage.Dir = "/var/lib/rxgate"
		want.Admin.APIKey = "change-me-to-a-long-random-string"
		want.Auth.JWKSURL = ""
		want.Auth.BuiltinIssuer = true
		assert.Equal(t, want, c, "the example shows the defaults apart from its documented overrides")
	})

	t.Run("has every key", func(t *testing.T) {
		t.Parallel()
		defaults := koanf.New(".")
		require.NoError(t, defaults.Load(structs.Provider(config.Defaults(), "koanf"), nil))
		example := koanf.New(".")
		require.NoError(t, example.Load(file.Provider(examplePath), yaml.Parser()))

		require.NotEmpty(t, defaults.Keys())
		for _, key := range defaults.Keys() {
			assert.True(t, example.Exists(key), "config.example.yaml lacks %q", key)
		}
	})

	t.Run("comments every key", func(t *testing.T) {
		t.Parallel()
		f, err := os.Open(examplePath)
		require.NoError(t, err)
		t.Cleanup(func() { _ = f.Close() })

		prev := ""
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			isLeaf := line != "" && !strings.HasPrefix(line, "#") && !strings.HasSuffix(line, ":")
			if isLeaf {
				assert.True(t, strings.HasPrefix(prev, "#"), "no comment above %q", line)
			}
			prev = line
		}
		require.NoError(t, sc.Err())
	})
}

func ptr[T any](v T) *T { return &v }

// TestReplicaName: storage.postgres.replica_id when set, else the host
// name made into a valid id.
func TestReplicaName(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	require.NoError(t, err)
	tests := []struct {
		name, id string
		want     func(string) bool
	}{
		{name: "set", id: "rxgate-2", want: func(got string) bool { return got == "rxgate-2" }},
		{name: "the host name by default", want: func(got string) bool {
			// A host name of the id's alphabet is kept as it is.
			return got != "" && len(got) <= 63 && (len(host) > 63 || strings.ContainsFunc(host, invalidIDRune) || got == host)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := validConfig(t)
			c.Storage.Driver, c.Storage.InMemory = config.DriverPostgres, false
			c.Storage.Postgres.URL = "postgres://rxgate@db:5432/rxgate"
			c.Storage.Postgres.ReplicaID = tt.id
			got := c.Storage.Postgres.ReplicaName()
			assert.True(t, tt.want(got), "replica name %q (host %q)", got, host)
			// The name a process runs under passes the key's validation.
			c.Storage.Postgres.ReplicaID = got
			require.NoError(t, c.Validate())
		})
	}
}

// invalidIDRune reports a rune a replica id may not hold.
func invalidIDRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
}

// TestSecretFiles: admin.api_key_file holds the key (trailing newlines
// trimmed), from the file or the environment; setting both, a missing,
// empty or oversized file are refused with a line naming the keys, never
// the secret.
func TestSecretFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	const secret = "file-secret-0123456789abcdef"
	withNewline := write("key", secret+"\n")
	withCRLF := write("key-crlf", secret+"\r\n\n")
	empty := write("empty", "\n")
	huge := write("huge", strings.Repeat("k", 64<<10+1))
	tests := []struct {
		name    string
		environ []string
		wantKey string
		wantURL string
		wantErr []string // substrings of the error; nil: no error
	}{
		{name: "file, newline trimmed", environ: []string{"RXGATE_ADMIN__API_KEY_FILE=" + withNewline}, wantKey: secret},
		{name: "file, CRLF and blank line trimmed", environ: []string{"RXGATE_ADMIN__API_KEY_FILE=" + withCRLF}, wantKey: secret},
		{name: "key and file both", environ: []string{"RXGATE_ADMIN__API_KEY=" + secret, "RXGATE_ADMIN__API_KEY_FILE=" + withNewline},
			wantErr: []string{"admin.api_key and admin.api_key_file are both set"}},
		{name: "missing file", environ: []string{"RXGATE_ADMIN__API_KEY_FILE=" + filepath.Join(dir, "nope")},
			wantErr: []string{"admin.api_key_file", "nope"}},
		{name: "empty file", environ: []string{"RXGATE_ADMIN__API_KEY_FILE=" + empty}, wantErr: []string{"admin.api_key_file", "is empty"}},
		{name: "oversized file", environ: []string{"RXGATE_ADMIN__API_KEY_FILE=" + huge}, wantErr: []string{"admin.api_key_file", "larger than"}},
		{name: "database url file", environ: []string{"RXGATE_STORAGE__POSTGRES__URL_FILE=" + withNewline}, wantURL: secret},
		{name: "database url and file both", environ: []string{"RXGATE_STORAGE__POSTGRES__URL=" + secret, "RXGATE_STORAGE__POSTGRES__URL_FILE=" + withNewline},
			wantErr: []string{"storage.postgres.url and storage.postgres.url_file are both set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := config.Load(config.Options{Environ: tt.environ})
			if tt.wantErr != nil {
				require.Error(t, err)
				for _, w := range tt.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				assert.NotContains(t, err.Error(), secret, "an error never quotes the secret")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantKey, got.Admin.APIKey)
			assert.Equal(t, tt.wantURL, got.Storage.Postgres.URL)
		})
	}
}

// TestSecretFileModes: every file holding a secret (the operator key, the
// database URL, the encryption key) is refused when group or others may
// read or write it, with an error naming the setting, the file and its
// mode; a file its owner alone may read (0600, 0400) is accepted.
func TestSecretFileModes(t *testing.T) {
	t.Parallel()
	const secret = "file-secret-0123456789abcdef"
	key := strings.Repeat("A", 43) + "=" // base64 of 32 zero bytes
	kinds := []struct {
		setting string
		content string
		// read reads the file at path as rxgate does at start-up.
		read func(path string) error
	}{
		{"admin.api_key_file", secret, func(path string) error {
			c, err := config.Load(config.Options{Environ: []string{"RXGATE_ADMIN__API_KEY_FILE=" + path}})
			if err == nil && c.Admin.APIKey != secret {
				return fmt.Errorf("admin.api_key is %q", c.Admin.APIKey)
			}
			return err
		}},
		{"storage.postgres.url_file", secret, func(path string) error {
			c, err := config.Load(config.Options{Environ: []string{"RXGATE_STORAGE__POSTGRES__URL_FILE=" + path}})
			if err == nil && c.Storage.Postgres.URL != secret {
				return fmt.Errorf("storage.postgres.url is %q", c.Storage.Postgres.URL)
			}
			return err
		}},
		{"storage.encryption_key_file", key, func(path string) error {
			_, err := config.ReadKeyFile("storage.encryption_key_file", path)
			return err
		}},
	}
	modes := []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true},
		{0o400, true},
		{0o640, false},
		{0o604, false},
		{0o620, false},
		{0o644, false},
	}
	for _, k := range kinds {
		t.Run(k.setting, func(t *testing.T) {
			t.Parallel()
			for _, m := range modes {
				t.Run(fmt.Sprintf("%04o", m.mode), func(t *testing.T) {
					p := filepath.Join(t.TempDir(), "secret")
					require.NoError(t, os.WriteFile(p, []byte(k.content+"\n"), 0o600))
					require.NoError(t, os.Chmod(p, m.mode)) // the umask does not apply to chmod
					err := k.read(p)
					if m.ok {
						require.NoError(t, err)
						return
					}
					require.Error(t, err)
					assert.Contains(t, err.Error(), k.setting)
					assert.Contains(t, err.Error(), p)
					assert.Contains(t, err.Error(), fmt.Sprintf("mode %04o", m.mode))
					assert.NotContains(t, err.Error(), k.content, "an error never quotes the secret")
				})
			}
		})
	}
}

// TestTestKitVariablesIgnored: RXGATE_TEST_ variables belong to the test
// kits; a machine that exports them still runs rxgate.
func TestTestKitVariablesIgnored(t *testing.T) {
	t.Parallel()
	c, err := config.Load(config.Options{Environ: []string{
		"RXGATE_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test", "RXGATE_TEST_STORE=postgres", "RXGATE_HTTP__LISTEN=127.0.0.1:9",
	}})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9", c.HTTP.Listen)
	assert.Equal(t, config.DriverBadger, c.Storage.Driver)
}

// TestAllowedPrefixes: the queue gets webhooks.allowed_networks parsed.
func TestAllowedPrefixes(t *testing.T) {
	t.Parallel()
	w := config.Webhooks{AllowedNetworks: []string{"10.20.0.0/16", " fd00:1234::/32", "not a network"}}
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("fd00:1234::/32")}, w.AllowedPrefixes())
	assert.Empty(t, config.Defaults().Webhooks.AllowedPrefixes())
}

// TestAuditDefaults: the audit trail is on by default and kept seven
// years, apart from the webhooks' retention.
func TestAuditDefaults(t *testing.T) {
	t.Parallel()
	c := config.Defaults()
	require.True(t, c.Audit.Enabled)
	require.Equal(t, 2555*24*time.Hour, c.Audit.Retention)
	require.Equal(t, 61320*time.Hour, c.Audit.Retention)
	require.NotEqual(t, c.Webhooks.Retention, c.Audit.Retention)
	require.Empty(t, c.Audit.KeyFile)
}
