package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
)

// Audit checks the audit trail of a running server through the operator
// API, with admin.api_key:
//
//	rxgate audit verify [--key-file FILE | --public-key BASE64]
//
// It reads every checkpoint, then every entry, and reports the first
// changed, removed or reordered entry (by seq), each checkpoint that is
// not signed by the audit key or that the chain no longer matches, and a
// truncated tail (a checkpoint beyond the last entry). Any finding is an
// error: the command exits non-zero. The key it checks against should be
// pinned (--key-file, the server's audit.key_file, or --public-key); the
// server's own word for it is used otherwise, with a warning, since a
// server that was tampered with could name another key.
func Audit(ctx context.Context, env Env, args []string) error {
	const usage = "audit: usage: audit verify [--key-file FILE | --public-key BASE64] (with --config, --admin-url)"
	if len(args) == 0 || args[0] != "verify" {
		return errors.New(usage)
	}
	fs := newFlagSet("audit verify", env.Stderr)
	configPath := fs.String("config", "", "YAML config file (for admin.listen and admin.api_key)")
	adminURL := fs.String("admin-url", "", "operator API URL (default: http://{admin.listen})")
	keyFile := fs.String("key-file", "", "the audit key file (audit.key_file) whose public half checks the checkpoints")
	pubFlag := fs.String("public-key", "", "the audit key's public half, base64")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 || (*keyFile != "" && *pubFlag != "") {
		return errors.New(usage)
	}
	var pub ed25519.PublicKey
	switch {
	case *keyFile != "":
		seed, err := config.ReadKeyFile("--key-file", *keyFile)
		if err != nil {
			return fmt.Errorf("audit verify: %w", err)
		}
		pub = ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	case *pubFlag != "":
		b, err := base64.StdEncoding.DecodeString(*pubFlag)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return errors.New("audit verify: --public-key is not a base64 Ed25519 public key")
		}
		pub = b
	}
	client, err := newOperatorClient("audit verify", *configPath, *adminURL, time.Minute)
	if err != nil {
		return err
	}
	// Checkpoints first: each names an entry stored before it, so every
	// checkpoint read is covered by the entries read after it, however
	// many are appended in between (this command's requests included).
	var cps struct {
		PublicKey   []byte                    `json:"public_key"`
		Checkpoints []storage.AuditCheckpoint `json:"checkpoints"`
	}
	if _, err := client.getData(ctx, "/admin/v1/audit/checkpoints", &cps); err != nil {
		return err
	}
	if pub == nil {
		if len(cps.PublicKey) != ed25519.PublicKeySize {
			return errors.New("audit verify: the server names no audit key: give --key-file or --public-key")
		}
		fmt.Fprintln(env.Stderr, "audit verify: warning: checking against the key the server names; pin it with --key-file or --public-key")
		pub = cps.PublicKey
	}
	var entries []storage.AuditEntry
	q := url.Values{"limit": {"1000"}}
	for {
		var page []storage.AuditEntry
		p, err := client.getData(ctx, "/admin/v1/audit?"+q.Encode(), &page)
		if err != nil {
			return err
		}
		entries = append(entries, page...)
		if !p.HasNext || p.LastKey == "" {
			break
		}
		q.Set("lastKey", p.LastKey)
	}
	findings := storage.VerifyAudit(entries, cps.Checkpoints, pub)
	for _, f := range findings {
		fmt.Fprintln(env.Stdout, f.String())
	}
	if len(findings) > 0 {
		return fmt.Errorf("audit verify: %d finding(s): the audit trail was changed", len(findings))
	}
	last := uint64(0)
	if n := len(entries); n > 0 {
		last = entries[n-1].Seq
	}
	fmt.Fprintf(env.Stdout, "audit trail whole: %d entries (to seq %d), %d checkpoints\n", len(entries), last, len(cps.Checkpoints))
	return nil
}

// pagination is an answer's pagination.
type pagination struct {
	HasNext bool   `json:"hasNext"`
	LastKey string `json:"lastKey"`
}

// getData GETs path and decodes the envelope's data into v; an answer
// other than 2xx is an error with its detail.
func (c *operatorClient) getData(ctx context.Context, path string, v any) (pagination, error) {
	var p pagination
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	var out struct {
		Data       json.RawMessage `json:"data"`
		Pagination *pagination     `json:"pagination"`
		Error      struct {
			Detail string `json:"detail"`
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&out); err != nil {
		return p, fmt.Errorf("%s: reading the answer (HTTP %d): %w", c.cmd, resp.StatusCode, err)
	}
	if resp.StatusCode/100 != 2 {
		return p, fmt.Errorf("%s: HTTP %d: %s", c.cmd, resp.StatusCode, out.Error.Detail)
	}
	if err := json.Unmarshal(out.Data, v); err != nil {
		return p, fmt.Errorf("%s: reading the answer: %w", c.cmd, err)
	}
	if out.Pagination != nil {
		p = *out.Pagination
	}
	return p, nil
}
