package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rxgate/rxgate/config"
)

// operatorClient calls the operator API of a running server for a
// command (token, backup): at admin.listen (or --admin-url) with
// admin.api_key, both read from --config and the environment.
type operatorClient struct {
	cmd  string // the command, which prefixes its errors
	base string // the operator API's URL, no trailing slash
	key  string
	http *http.Client
}

// newOperatorClient reads where cmd reaches the operator API and the key
// it sends: admin.listen (or adminURL) and admin.api_key (or its file),
// from configPath and the environment. timeout bounds each request; 0 is
// none (a backup download takes as long as it takes).
func newOperatorClient(cmd, configPath, adminURL string, timeout time.Duration) (*operatorClient, error) {
	cfg, err := config.Load(config.Options{Path: configPath, Environ: os.Environ()})
	if err != nil {
		return nil, err
	}
	if cfg.Admin.APIKey == "" {
		return nil, fmt.Errorf("%s: admin.api_key is not set (use --config, RXGATE_ADMIN__API_KEY or RXGATE_ADMIN__API_KEY_FILE)", cmd)
	}
	base := adminURL
	if base == "" {
		base = "http://" + cfg.Admin.Listen
	}
	return &operatorClient{cmd: cmd, base: strings.TrimRight(base, "/"), key: cfg.Admin.APIKey, http: &http.Client{Timeout: timeout}}, nil
}

// do sends a request with the operator API key to path (from /admin/v1/)
// and returns the answer, whatever its status; body, when not nil, is
// JSON.
func (c *operatorClient) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.cmd, err)
	}
	return resp, nil
}
