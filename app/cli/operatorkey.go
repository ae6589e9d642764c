package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"text/tabwriter"
	"time"
)

// OperatorKey manages the operator keys of a running server through the
// operator API (/admin/v1/operator-keys), with admin.api_key:
//
//	rxgate operator-key create --name N --role admin|operator|viewer|partner:<partner id>
//	rxgate operator-key list
//	rxgate operator-key revoke ID
//
// create prints the key, which is shown this once; list prints no key.
func OperatorKey(ctx context.Context, env Env, args []string) error {
	const usage = "operator-key: usage: operator-key create --name N --role R | list | revoke ID (each with --config, --admin-url)"
	if len(args) == 0 {
		return errors.New(usage)
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("operator-key "+sub, env.Stderr)
	configPath := fs.String("config", "", "YAML config file (for admin.listen and admin.api_key)")
	adminURL := fs.String("admin-url", "", "operator API URL (default: http://{admin.listen})")
	var name, role *string
	if sub == "create" {
		name = fs.String("name", "", "the key's name, unique (revoked keys' names stay taken)")
		role = fs.String("role", "", "admin, operator, viewer or partner:<partner id>")
	}
	switch sub {
	case "create", "list", "revoke":
	default:
		return errors.New(usage)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	var method, path string
	var body io.Reader
	switch sub {
	case "create":
		if *name == "" || *role == "" || fs.NArg() != 0 {
			return errors.New("operator-key create: --name and --role are required")
		}
		b, _ := json.Marshal(map[string]string{"name": *name, "role": *role})
		method, path, body = http.MethodPost, "/admin/v1/operator-keys", bytes.NewReader(b)
	case "list":
		if fs.NArg() != 0 {
			return errors.New(usage)
		}
		method, path = http.MethodGet, "/admin/v1/operator-keys"
	case "revoke":
		if fs.NArg() != 1 {
			return errors.New("operator-key revoke: give the key's id (operator-key list shows it)")
		}
		method, path = http.MethodPost, "/admin/v1/operator-keys/"+fs.Arg(0)+"/revoke"
	}
	client, err := newOperatorClient("operator-key", *configPath, *adminURL, 15*time.Second)
	if err != nil {
		return err
	}
	resp, err := client.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	type keyView struct {
		KeyID     string     `json:"key_id"`
		Name      string     `json:"name"`
		Role      string     `json:"role"`
		Key       string     `json:"key"`
		CreatedAt time.Time  `json:"created_at"`
		RevokedAt *time.Time `json:"revoked_at"`
	}
	var out struct {
		Data  json.RawMessage `json:"data"`
		Error struct {
			Detail     string `json:"detail"`
			Validation []struct {
				Field, Message string
			} `json:"validation"`
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&out); err != nil {
		return fmt.Errorf("operator-key %s: reading the answer (HTTP %d): %w", sub, resp.StatusCode, err)
	}
	if resp.StatusCode/100 != 2 {
		msg := out.Error.Detail
		for _, v := range out.Error.Validation {
			msg += "; " + v.Field + " " + v.Message
		}
		return fmt.Errorf("operator-key %s: HTTP %d: %s", sub, resp.StatusCode, msg)
	}
	if sub == "list" {
		var keys []keyView
		if err := json.Unmarshal(out.Data, &keys); err != nil {
			return fmt.Errorf("operator-key list: reading the answer: %w", err)
		}
		w := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tROLE\tCREATED\tREVOKED")
		for _, k := range keys {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", k.KeyID, k.Name, k.Role, k.CreatedAt.UTC().Format(time.RFC3339), revoked)
		}
		return w.Flush()
	}
	var k keyView
	if err := json.Unmarshal(out.Data, &k); err != nil {
		return fmt.Errorf("operator-key %s: reading the answer: %w", sub, err)
	}
	if sub == "create" {
		// The key alone on stdout, so that a script can capture it; what
		// it is goes to stderr.
		fmt.Fprintf(env.Stderr, "operator key %s (%s, role %s); the key is shown this once:\n", k.KeyID, k.Name, k.Role)
		fmt.Fprintln(env.Stdout, k.Key)
		return nil
	}
	fmt.Fprintf(env.Stdout, "revoked %s (%s) at %s\n", k.KeyID, k.Name, k.RevokedAt.UTC().Format(time.RFC3339))
	return nil
}
