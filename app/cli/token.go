package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Token mints a partner token through the operator API (POST
// /admin/v1/tokens) and prints it.
func Token(ctx context.Context, env Env, args []string) error {
	fs := newFlagSet("token", env.Stderr)
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
	client, err := newOperatorClient("token", *configPath, *adminURL, 15*time.Second)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{
		"organization_id": *org, "user_id": *user, "scopes": []string(scopes), "ttl_seconds": int(ttl.Seconds()),
	})
	resp, err := client.do(ctx, http.MethodPost, "/admin/v1/tokens", bytes.NewReader(body))
	if err != nil {
		return err
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
	fmt.Fprintln(env.Stdout, out.Data.AccessToken)
	return nil
}
