package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/demo"
)

// Sandbox runs a throwaway instance: in memory unless --data-dir is given,
// built-in issuer on, demo data seeded (storage/demo), and everything
// needed to use it printed.
func Sandbox(ctx context.Context, env Env, args []string) error {
	f := newCommonFlags("sandbox", env.Stderr)
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
	logger := newLogger(cfg, env.Stderr)
	return runServer(ctx, cfg, env.Version, logger, queue.NewOffsetClock(), func(a *app.App, store storage.Store) error {
		facts, err := seedSandbox(ctx, a, store, cfg)
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
		printFacts(env.Stdout, env.Version, facts)
		return nil
	})
}

// printFacts writes what the sandbox prints once it serves.
func printFacts(w io.Writer, version string, f *SandboxFacts) {
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

// SandboxUser is a seeded user and a ready token for it.
type SandboxUser struct {
	Role   string `json:"role"`
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Name   string `json:"name"`
	Token  string `json:"token"`
}

// SandboxPatient is a seeded patient as the sandbox prints it: ids and a
// name only (demo data, never a real person).
type SandboxPatient struct {
	PatientID     string `json:"patient_id"`
	Name          string `json:"name"`
	UserID        string `json:"user_id"` // the prescriber whose patient it is
	Prescriptions int    `json:"prescriptions"`
}

// SandboxFacts is everything `rxgate sandbox` prints, also written as JSON
// by --print-json.
type SandboxFacts struct {
	BaseURL     string `json:"base_url"`
	AdminURL    string `json:"admin_url"`
	AdminAPIKey string `json:"admin_api_key"`
	// ConsoleSignInURL signs its first visitor in to the console, once.
	ConsoleSignInURL   string        `json:"console_sign_in_url"`
	PartnerID          string        `json:"partner_id"`
	PartnerSecret      string        `json:"partner_secret"`
	OrganizationID     string        `json:"organization_id"`
	OrganizationSecret string        `json:"organization_secret"`
	Users              []SandboxUser `json:"users"`
	PatientIDs         []string      `json:"patient_ids"`
	// Patients are every seeded patient, each of RxUserID.
	Patients []SandboxPatient `json:"patients"`
	// RxPatientID is the patient with 60+ prescriptions.
	RxPatientID    string         `json:"rx_patient_id"`
	RxUserID       string         `json:"rx_user_id"`
	TokenExpiresAt time.Time      `json:"token_expires_at"`
	Curl           []ShellCommand `json:"curl"`
}

// ShellCommand is a described shell command that works when pasted alone.
type ShellCommand struct {
	Title   string `json:"title"`
	Command string `json:"command"`
}

// sandboxTokenTTL is the lifetime of the tokens the sandbox prints.
const sandboxTokenTTL = 12 * time.Hour

// seedSandbox fills a's empty store (store) with the demo data, or rotates the
// secrets of a store seeded before (a kept --data-dir), and returns what
// the sandbox prints: the demo ids and secrets, a token for each user
// minted by a's built-in issuer, and curl commands.
func seedSandbox(ctx context.Context, a *app.App, store storage.Store, cfg *config.Config) (*SandboxFacts, error) {
	issuer := a.Issuer()
	if issuer == nil {
		return nil, errors.New("sandbox: needs the built-in issuer")
	}
	s, err := demo.Seed(ctx, store, demo.Options{Scopes: auth.PartnerScopes, BaseURL: a.BaseURL()})
	if err != nil {
		return nil, err
	}
	f := &SandboxFacts{
		BaseURL: a.BaseURL(), AdminURL: a.AdminURL(), AdminAPIKey: cfg.Admin.APIKey, ConsoleSignInURL: a.ConsoleSignInURL(),
		PartnerID: s.PartnerID, PartnerSecret: s.PartnerSecret,
		OrganizationID: s.OrganizationID, OrganizationSecret: s.OrganizationSecret,
		RxPatientID: s.RxPatientID, RxUserID: s.PrescriberID,
	}
	for _, p := range s.Patients {
		f.PatientIDs = append(f.PatientIDs, p.ID)
		f.Patients = append(f.Patients, SandboxPatient{PatientID: p.ID, Name: p.Name, UserID: p.UserID, Prescriptions: p.Prescriptions})
	}
	for _, u := range s.Users {
		// A kept store may hold a user disabled and enabled since: the
		// token's disable stamp comes from the user as stored now (a user
		// still disabled gets none, so its token stays void after an enable).
		_, stored, err := store.GetMember(ctx, s.OrganizationID, u.ID)
		if err != nil {
			return nil, err
		}
		var disabledAt time.Time
		if !stored.Disabled {
			disabledAt = stored.DisabledAt
		}
		token, exp, err := issuer.Mint(auth.MintRequest{UserID: u.ID, OrgID: s.OrganizationID, Scopes: auth.PartnerScopes, TTL: sandboxTokenTTL, DisabledAt: disabledAt})
		if err != nil {
			return nil, err
		}
		f.TokenExpiresAt = exp.UTC()
		f.Users = append(f.Users, SandboxUser{Role: string(u.Role), UserID: u.ID, Email: u.Email, Name: u.Name(), Token: token})
	}
	f.Curl = sandboxCommands(f)
	return f, nil
}

// sandboxCommands are curl commands with every value inlined, so each one
// works pasted alone.
func sandboxCommands(f *SandboxFacts) []ShellCommand {
	prescriber := f.Users[2]
	org := f.OrganizationID
	auth := func(token string) string {
		return fmt.Sprintf(" -H 'Authorization: Bearer %s' -H 'x-organization-secret: %s'", token, f.OrganizationSecret)
	}
	return []ShellCommand{
		{"Get a token from /v1/token, as the hosted service issues them", fmt.Sprintf(
			"curl -s -X POST '%s/v1/token' -H 'Content-Type: application/json' -H 'x-partner-id: %s' -H 'x-partner-secret: %s' -H 'x-organization-id: %s' -H 'x-organization-secret: %s' -H 'x-user-id: %s' -d '{\"grantType\":\"client_credentials\",\"scope\":[\"read:patient_prescription\",\"update:patient\"]}'",
			f.BaseURL, f.PartnerID, f.PartnerSecret, org, f.OrganizationSecret, prescriber.UserID)},
		{"List the first page of a patient's prescriptions (newest first; pass pagination.lastKey as ?lastKey= for the next)", fmt.Sprintf(
			"curl -s '%s/v1/organizations/%s/users/%s/patients/%s/prescriptions?limit=5'%s", f.BaseURL, org, f.RxUserID, f.RxPatientID, auth(prescriber.Token))},
		{"Update a patient (only the members sent change)", fmt.Sprintf(
			"curl -s -X PUT '%s/v1/organizations/%s/users/%s/patients/%s'%s -H 'Content-Type: application/json' -d '{\"phone\":\"0498765432\",\"australian_address\":{\"street_number\":\"12\",\"street_name\":\"George Street\",\"suburb\":\"Sydney\",\"state\":\"NSW\",\"postcode\":\"2000\"}}'",
			f.BaseURL, org, f.RxUserID, f.RxPatientID, auth(prescriber.Token))},
		{"List a prescriber's custom drugs (organization-level and their own)", fmt.Sprintf(
			"curl -s '%s/v1/organizations/%s/users/%s/custom-drugs'%s", f.BaseURL, org, prescriber.UserID, auth(prescriber.Token))},
		{"List the organization's users (an admin token)", fmt.Sprintf(
			"curl -s '%s/v1/organizations/%s/users?limit=3'%s", f.BaseURL, org, auth(f.Users[1].Token))},
		{"Validate the organization (needed once before webhooks are sent)", fmt.Sprintf(
			"curl -s '%s/v1/organizations/%s/validate'%s", f.BaseURL, org, auth(f.Users[0].Token))},
		{"Read a patient through the operator API", fmt.Sprintf(
			"curl -s '%s/admin/v1/organizations/%s/users/%s/patients/%s' -H 'Authorization: Bearer %s'",
			f.AdminURL, org, f.RxUserID, f.RxPatientID, f.AdminAPIKey)},
		{"Register a webhook endpoint for `rxgate listen --port 9000` (the answer shows its secret once)", fmt.Sprintf(
			"curl -s -X POST '%s/admin/v1/webhook-endpoints' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"partner_id\":\"%s\",\"url\":\"http://127.0.0.1:9000/\"}'",
			f.AdminURL, f.AdminAPIKey, f.PartnerID)},
		{"Create a prescription through the operator API (emits prescription.created once the organization is validated)", fmt.Sprintf(
			"curl -s -X POST '%s/admin/v1/organizations/%s/users/%s/patients/%s/prescriptions' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"item_name\":\"Amoxicillin\",\"item_strength\":\"500 mg\",\"item_form\":\"capsule\",\"route_administration\":\"oral\",\"quantity\":\"20\",\"number_of_repeats_authorised\":\"0\",\"delivery\":{\"method\":\"SMS\",\"recipient_type\":\"PATIENT\",\"destination\":\"0412345678\"}}'",
			f.AdminURL, org, f.RxUserID, f.RxPatientID, f.AdminAPIKey)},
		{"Mint a token through the operator API", fmt.Sprintf(
			"curl -s -X POST '%s/admin/v1/tokens' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"organization_id\":\"%s\",\"user_id\":\"%s\",\"scopes\":[\"read:patient_prescription\"],\"ttl_seconds\":3600}'",
			f.AdminURL, f.AdminAPIKey, org, prescriber.UserID)},
	}
}
