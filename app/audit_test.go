package app

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
)

// auditApp is an App with an audit trail whose goroutine is not started:
// the tests flush it themselves.
type auditApp struct {
	app                *App
	store              *badger.Store
	trail              *AuditTrail
	pub                ed25519.PublicKey
	org, user, patient string
	orgSecret, token   string
}

func newAuditApp(t testing.TB) *auditApp {
	t.Helper()
	cfg := config.Defaults()
	cfg.Storage.InMemory = true
	cfg.Auth.BuiltinIssuer = true
	cfg.HTTP.Listen, cfg.Admin.Listen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Admin.APIKey = "test-admin-key-0123456789"
	require.NoError(t, cfg.Validate())
	store, err := badger.Open(badger.Options{InMemory: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, store.Close()) })
	pub, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	trail := NewAuditTrail(store, AuditOptions{Key: key, CheckpointEvery: 3})
	a, err := New(cfg, store, Options{Audit: trail})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, a.Shutdown(context.Background())) })

	ctx := context.Background()
	secret := storage.NewSecret()
	p := &storage.Partner{Name: "Audit", SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(t, store.CreatePartner(ctx, p))
	o := &storage.Organization{Name: "Audit Clinic", PartnerID: p.ID, AllowedScopes: auth.PartnerScopes, SecretHash: storage.HashSecret(secret)}
	require.NoError(t, store.CreateOrganization(ctx, o))
	u := &storage.User{OrgID: o.ID, Email: "gp@audit.example", GivenName: "Grace", FamilyName: "Hopper", Title: "Dr", Role: storage.RolePrescriber}
	require.NoError(t, store.CreateUser(ctx, u))
	pt := &storage.Patient{OrgID: o.ID, UserID: u.ID, PatientFields: fuzzBaseline()}
	require.NoError(t, store.CreatePatient(ctx, pt))
	tok, _, err := a.Issuer().Mint(auth.MintRequest{UserID: u.ID, OrgID: o.ID, Scopes: auth.PartnerScopes, TTL: time.Hour})
	require.NoError(t, err)
	return &auditApp{app: a, store: store, trail: trail, pub: pub, org: o.ID, user: u.ID, patient: pt.ID, orgSecret: secret, token: tok}
}

// partner sends a partner API request and returns its status.
func (x *auditApp) partner(t testing.TB, method, path, body string, authed bool) int {
	t.Helper()
	r := httptest.NewRequest(method, x.app.cfg.HTTP.BasePath+"/v1/organizations/"+x.org+"/users/"+x.user+path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if authed {
		r.Header.Set("Authorization", "Bearer "+x.token)
	}
	r.Header.Set("X-Organization-Secret", x.orgSecret)
	w := httptest.NewRecorder()
	x.app.PartnerHandler().ServeHTTP(w, r)
	return w.Code
}

// operator sends an operator API request with admin.api_key.
func (x *auditApp) operator(t testing.TB, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	r.Host = x.app.cfg.Admin.Listen
	r.Header.Set("Authorization", "Bearer "+x.app.cfg.Admin.APIKey)
	w := httptest.NewRecorder()
	x.app.AdminHandler().ServeHTTP(w, r)
	return w
}

// entries flushes the trail and returns the whole chain.
func (x *auditApp) entries(t testing.TB) []storage.AuditEntry {
	t.Helper()
	require.NoError(t, x.trail.Flush(t.Context()))
	page, info, err := x.store.ListAudit(t.Context(), storage.AuditFilter{}, storage.PageRequest{Limit: 1000})
	require.NoError(t, err)
	require.False(t, info.HasNext)
	return page
}

// TestAuditRequests: reads, changes (in their transaction), refused and
// failed requests and operator actions each leave one entry with who,
// what and the outcome, and the chain verifies with its checkpoints.
func TestAuditRequests(t *testing.T) {
	t.Parallel()
	x := newAuditApp(t)
	update := `{"given_name":"Changed"}`
	steps := []struct {
		name    string
		send    func() int
		status  int
		op      string
		outcome int
		patient bool
	}{
		{"page read", func() int { return x.partner(t, http.MethodGet, "/patients/"+x.patient+"/prescriptions", "", true) },
			http.StatusOK, "prescriptions.list", http.StatusOK, true},
		{"change", func() int { return x.partner(t, http.MethodPut, "/patients/"+x.patient, update, true) },
			http.StatusOK, "patient.update", storage.AuditCommitted, true},
		{"refused change", func() int { return x.partner(t, http.MethodPut, "/patients/"+x.patient, `{"sex":"nonsense"}`, true) },
			0, "patient.update", -1, true},
		{"unknown patient", func() int {
			return x.partner(t, http.MethodGet, "/patients/"+storage.NewID()+"/prescriptions", "", true)
		},
			http.StatusNotFound, "prescriptions.list", http.StatusNotFound, false},
		{"no token", func() int { return x.partner(t, http.MethodGet, "/patients/"+x.patient+"/prescriptions", "", false) },
			http.StatusUnauthorized, "prescriptions.list", http.StatusUnauthorized, true},
		{"operator", func() int { return x.operator(t, http.MethodGet, "/admin/v1/operator-keys").Code },
			http.StatusOK, "operator.keys.list", http.StatusOK, false},
	}
	for _, s := range steps {
		got := s.send()
		if s.status != 0 {
			require.Equal(t, s.status, got, s.name)
		}
	}
	all := x.entries(t)
	require.Len(t, all, len(steps), "one entry per request")
	byOp := map[string][]storage.AuditEntry{}
	for _, e := range all {
		byOp[e.Operation] = append(byOp[e.Operation], e)
	}
	// The change committed with its entry in its transaction, before
	// the page read's entry, which waited in the buffer: order is commit
	// order, not request order.
	for i, s := range steps {
		var e *storage.AuditEntry
		for j := range all {
			if all[j].Operation == s.op && (s.outcome < 0 || all[j].Outcome == s.outcome) && (!s.patient || all[j].PatientID == x.patient) {
				e = &all[j]
				all[j].Operation = "" // matched once
				break
			}
		}
		require.NotNil(t, e, "step %d %s has its entry", i, s.name)
		if s.outcome < 0 {
			require.GreaterOrEqual(t, e.Outcome, 400, "a refused change is recorded with its status")
		}
		switch s.op {
		case "operator.keys.list":
			require.Equal(t, storage.AuditActorOperator, e.ActorKind)
			require.Equal(t, configKeyName, e.OperatorName)
			require.Equal(t, roleAdmin, e.OperatorRole)
		default:
			require.Equal(t, storage.AuditActorPartner, e.ActorKind)
			require.Equal(t, x.org, e.OrgID)
			if s.name != "no token" {
				require.Equal(t, x.user, e.UserID, s.name)
				require.NotEmpty(t, e.PartnerID)
			} else {
				require.Empty(t, e.UserID, "no token names no user")
			}
		}
		require.NotEmpty(t, e.RequestID)
	}

	all = x.entries(t)
	raw, err := json.Marshal(all)
	require.NoError(t, err)
	for _, value := range []string{"Changed", "Jane", "Citizen", "0412345678", "Collins"} {
		require.NotContains(t, string(raw), value, "no patient value enters the trail")
	}
	cps, err := x.store.ListAuditCheckpoints(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, cps)
	require.Empty(t, storage.VerifyAudit(all, cps, x.pub))
}

// TestAuditList: GET /admin/v1/audit filters and pages; a viewer is
// refused (admin only); the read is itself audited.
func TestAuditList(t *testing.T) {
	t.Parallel()
	x := newAuditApp(t)
	for range 3 {
		require.Equal(t, http.StatusOK, x.partner(t, http.MethodGet, "/patients/"+x.patient+"/prescriptions", "", true))
	}
	require.NoError(t, x.trail.Flush(t.Context()))
	w := x.operator(t, http.MethodGet, "/admin/v1/audit?patient_id="+x.patient+"&limit=2")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	var page struct {
		Data       []storage.AuditEntry `json:"data"`
		Pagination struct {
			HasNext bool   `json:"hasNext"`
			LastKey string `json:"lastKey"`
		} `json:"pagination"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &page))
	require.Len(t, page.Data, 2)
	require.True(t, page.Pagination.HasNext)
	w = x.operator(t, http.MethodGet, "/admin/v1/audit?patient_id="+x.patient+"&limit=2&lastKey="+page.Pagination.LastKey)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &page))
	require.Len(t, page.Data, 1)
	require.Equal(t, http.StatusBadRequest, x.operator(t, http.MethodGet, "/admin/v1/audit?from=yesterday").Code)

	w = x.operator(t, http.MethodGet, "/admin/v1/audit/checkpoints")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"public_key"`)

	all := x.entries(t)
	n := 0
	for _, e := range all {
		if strings.HasPrefix(e.Operation, "operator.audit.") {
			n++
		}
	}
	require.Equal(t, 4, n, "reading the trail is audited too")
}

// TestAuditEveryRoute: every route of both listeners is named in
// auditOperations, or is one that touches no data (health, documents,
// metrics, the console's static files and sign-in, the token endpoint,
// whose partner is unknown until it answers).
func TestAuditEveryRoute(t *testing.T) {
	t.Parallel()
	a, _ := newTestApp(t, Options{})
	exempt := map[string]bool{
		"/healthz": true, "/readyz": true, "/admin/v1/openapi.json": true, "/metrics": true,
		"/.well-known/jwks.json": true, "/v1/openapi.json": true, "/docs": true, "/v1/token": true,
		"/console": true, "/console/static/console.css": true, "/console/static/favicon.svg": true,
		"/console/sign-in": true, "/console/sign-in/:token": true, "/console/sign-out": true, "/console/*": true,
	}
	for _, e := range []struct {
		routes []string
		trim   string
	}{{routePaths(a.partner.Routes()), a.cfg.HTTP.BasePath}, {routePaths(a.admin.Routes()), ""}} {
		for _, r := range e.routes {
			method, path, _ := strings.Cut(r, " ")
			path = strings.TrimPrefix(path, e.trim)
			if exempt[path] || method == http.MethodHead {
				continue
			}
			require.NotEmpty(t, auditOperations[method+" "+path], "route %s has no audit operation", r)
		}
	}
}

// routePaths lists routes as "METHOD path".
func routePaths(routes []*echo.Route) []string {
	out := make([]string, 0, len(routes))
	for _, r := range routes {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// TestAuditConsolePage: the console's audit page lists the trail with the
// API's filters for an admin, and is itself audited.
func TestAuditConsolePage(t *testing.T) {
	t.Parallel()
	x := newAuditApp(t)
	require.Equal(t, http.StatusOK, x.partner(t, http.MethodGet, "/patients/"+x.patient+"/prescriptions", "", true))
	host := x.app.cfg.Admin.Listen
	send := func(r *http.Request) *httptest.ResponseRecorder {
		r.Host = host
		w := httptest.NewRecorder()
		x.app.AdminHandler().ServeHTTP(w, r)
		return w
	}
	r := httptest.NewRequest(http.MethodPost, "/console/sign-in", strings.NewReader("key="+x.app.cfg.Admin.APIKey))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://"+host)
	w := send(r)
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	cookies := w.Result().Cookies()
	require.NotEmpty(t, cookies)
	get := func(path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		for _, c := range cookies {
			r.AddCookie(c)
		}
		return send(r)
	}
	w = get("/console/audit?patient_id=" + x.patient)
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	body := w.Body.String()
	require.Contains(t, body, "prescriptions.list")
	require.Contains(t, body, x.user)
	require.NotContains(t, body, "Jane", "no patient value")
	w = get("/console/")
	require.Contains(t, w.Body.String(), `href="/console/audit"`, "an admin sees the audit page in the menu")
	w = get("/console/audit?from=yesterday")
	require.Equal(t, http.StatusBadRequest, w.Code)

	var pages int
	for _, e := range x.entries(t) {
		if e.Operation == "console.audit.list" {
			require.Equal(t, configKeyName, e.OperatorName)
			pages++
		}
	}
	require.Equal(t, 2, pages, "each view of the page is audited, the refused one too")
}
