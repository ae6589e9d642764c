package testsuite_test

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/testsuite"
)

const endpointsPath = "/admin/v1/webhook-endpoints"

// registerEndpoint registers url for the partner and returns the endpoint
// id and secret.
func registerEndpoint(t testing.TB, env *testsuite.Env, partnerID, url string) (id, secret string) {
	t.Helper()
	r := env.MustAdmin(t, http.MethodPost, endpointsPath, map[string]any{"partner_id": partnerID, "url": url}, http.StatusCreated)
	return r.String(t, "data.endpoint_id"), r.String(t, "data.secret")
}

// prescribe creates a prescription for the tenant's patient through the
// operator API and returns its scid.
func prescribe(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant) string {
	t.Helper()
	r := env.MustAdmin(t, http.MethodPost, tn.PatientPath()+"/prescriptions",
		map[string]any{"item_name": "Amoxicillin 500 mg capsule", "quantity": "20"}, http.StatusCreated)
	return r.String(t, "data.scid")
}

// validate runs the partner validate operation for the tenant.
func validate(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant) {
	t.Helper()
	r := env.Do(t, testsuite.Request{URL: tn.ValidatePath(), Token: tn.Token(t, testsuite.RoleOwner), Headers: tn.Headers()})
	require.Equal(t, http.StatusOK, r.Status, "validate: %s", r.Body)
}

// eventOf finds the event of the tenant whose payload names scid.
func eventOf(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, scid string) map[string]any {
	t.Helper()
	for _, e := range listEvents(t, env, "organization_id="+tn.OrgID) {
		if e["payload"].(map[string]any)["data"].(map[string]any)["scid"] == scid {
			return e
		}
	}
	t.Fatalf("no event for scid %s", scid)
	return nil
}

// listEvents walks every page of GET /admin/v1/events?query.
func listEvents(t testing.TB, env *testsuite.Env, query string) []map[string]any {
	t.Helper()
	var out []map[string]any
	path := "/admin/v1/events?limit=100&" + query
	cursor := ""
	for {
		p := path
		if cursor != "" {
			p += "&lastKey=" + cursor
		}
		r := env.MustAdmin(t, http.MethodGet, p, nil, http.StatusOK)
		var page []map[string]any
		r.DecodeData(t, &page)
		out = append(out, page...)
		next, _ := r.Get("pagination.lastKey")
		if next == nil {
			return out
		}
		cursor = next.(string)
	}
}

// TestWebhookEndpointsAPI covers registration, listing, rotation and
// deletion of endpoints, and the URL rules.
func TestWebhookEndpointsAPI(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	key := env.AdminKey
	partnerID, _ := env.NewPartner(t)
	path := env.AdminPath(endpointsPath)
	var id, secret string
	created := time.Now().UTC()

	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{Name: "register", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": partnerID, "url": "https://hooks.example.com/rx"}, Status: http.StatusCreated,
			Check: func(t testing.TB, r *testsuite.Response) {
				id = isUUID(t, r, "data.endpoint_id")
				secret = r.String(t, "data.secret")
				assert.GreaterOrEqual(t, len(secret), 32)
				assert.Equal(t, partnerID, r.String(t, "data.partner_id"))
				assert.Equal(t, "https://hooks.example.com/rx", r.String(t, "data.url"))
				at, err := time.Parse(time.RFC3339Nano, r.String(t, "data.created_at"))
				require.NoError(t, err)
				assert.WithinDuration(t, created, at, time.Minute)
			}},
		{Name: "a loopback http url is allowed when allow_insecure_loopback is on", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": partnerID, "url": "http://127.0.0.1:9000/"}, Status: http.StatusCreated},
		{Name: "the same url twice for one partner", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": partnerID, "url": "https://hooks.example.com/rx"}, Status: http.StatusConflict, Slug: "conflict"},
		{Name: "plain http elsewhere", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": partnerID, "url": "http://hooks.example.com/rx"}, Status: http.StatusUnprocessableEntity,
			Check: fieldsInclude("url"), Contains: []string{"plain http is allowed only to loopback addresses"}},
		{Name: "not a url", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": partnerID, "url": "hooks.example.com"}, Status: http.StatusUnprocessableEntity, Check: fieldsInclude("url")},
		{Name: "user info", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": partnerID, "url": "https://u:p@hooks.example.com"}, Status: http.StatusUnprocessableEntity, Check: fieldsInclude("url")},
		{Name: "missing members", Method: http.MethodPost, Path: path, Token: key, Body: map[string]any{},
			Status: http.StatusUnprocessableEntity, Check: fieldsInclude("partner_id", "url")},
		{Name: "unknown partner", Method: http.MethodPost, Path: path, Token: key,
			Body: map[string]any{"partner_id": uuid.NewString(), "url": "https://x.example.com"}, Status: http.StatusUnprocessableEntity, Check: fieldsInclude("partner_id")},
		{Name: "without the admin key", Method: http.MethodPost, Path: path,
			Body: map[string]any{"partner_id": partnerID, "url": "https://y.example.com"}, Status: http.StatusUnauthorized},
		{Name: "list shows no secret", Path: path, Token: key, Status: http.StatusOK, Check: func(t testing.TB, r *testsuite.Response) {
			assert.NotContains(t, string(r.Body), secret)
			assert.NotContains(t, string(r.Body), `"secret"`)
			var list []map[string]any
			r.DecodeData(t, &list)
			var ids []any
			for _, e := range list {
				ids = append(ids, e["endpoint_id"])
			}
			assert.Contains(t, ids, id)
		}},
		{Name: "list by partner", Path: path + "?partner_id=" + partnerID, Token: key, Status: http.StatusOK, Check: func(t testing.TB, r *testsuite.Response) {
			var list []map[string]any
			r.DecodeData(t, &list)
			assert.Len(t, list, 2)
		}},
		{Name: "list by a malformed partner id", Path: path + "?partner_id=x", Token: key, Status: http.StatusBadRequest},
	})
	// These need the id registered above.
	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{Name: "get shows no secret", Path: path + "/" + id, Token: key, Status: http.StatusOK, NotContains: []string{`"secret"`}},
		{Name: "rotate returns a new secret", Method: http.MethodPost, Path: path + "/" + id + "/rotate-secret", Token: key, Status: http.StatusOK,
			Check: func(t testing.TB, r *testsuite.Response) {
				s := r.String(t, "data.secret")
				assert.NotEqual(t, secret, s)
				exp, err := time.Parse(time.RFC3339Nano, r.String(t, "data.previous_secret_expires_at"))
				require.NoError(t, err)
				assert.WithinDuration(t, time.Now().Add(24*time.Hour), exp, time.Minute, "rotation_grace defaults to 24h")
			}},
		{Name: "rotate an unknown endpoint", Method: http.MethodPost, Path: path + "/" + uuid.NewString() + "/rotate-secret", Token: key, Status: http.StatusNotFound},
		{Name: "delete", Method: http.MethodDelete, Path: path + "/" + id, Token: key, Status: http.StatusOK},
		{Name: "delete again", Method: http.MethodDelete, Path: path + "/" + id, Token: key, Status: http.StatusNotFound},
		{Name: "get after delete", Path: path + "/" + id, Token: key, Status: http.StatusNotFound},
		{Name: "malformed endpoint id", Path: path + "/not-a-uuid", Token: key, Status: http.StatusNotFound},
	})
}

// TestWebhookURLsNeedHTTPSByDefault: serve's default refuses every plain
// http URL, loopback included.
func TestWebhookURLsNeedHTTPSByDefault(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t, testsuite.WithConfig(func(c *config.Config) {}))
	require.False(t, env.Config.Webhooks.AllowInsecureLoopback)
	partnerID, _ := env.NewPartner(t)
	r := env.MustAdmin(t, http.MethodPost, endpointsPath, map[string]any{"partner_id": partnerID, "url": "http://127.0.0.1:9000/"}, http.StatusUnprocessableEntity)
	assert.Contains(t, string(r.Body), "must use https")
}

// TestWebhookURLsRefuseNonPublicAddresses: an endpoint whose host is a
// loopback, private, link-local (cloud metadata) or otherwise non-public
// address is refused at registration unless webhooks.allowed_networks
// opens it; a name is accepted, and judged on the address it resolves to
// at each attempt.
func TestWebhookURLsRefuseNonPublicAddresses(t *testing.T) {
	t.Parallel()
	const reason = "must not be a loopback, private, link-local or other non-public address"
	refused := func(url string) testsuite.Scenario {
		return testsuite.Scenario{Name: url + " is refused", Method: http.MethodPost, Path: endpointsPath,
			Body: map[string]any{"url": url}, Status: http.StatusUnprocessableEntity, Check: fieldsInclude("url"), Contains: []string{reason}}
	}
	accepted := func(url string) testsuite.Scenario {
		return testsuite.Scenario{Name: url + " is accepted", Method: http.MethodPost, Path: endpointsPath,
			Body: map[string]any{"url": url}, Status: http.StatusCreated}
	}
	tests := []struct {
		name      string
		networks  []string
		scenarios []testsuite.Scenario
	}{
		{name: "by default", scenarios: []testsuite.Scenario{
			refused("https://10.0.0.5/rx"),
			refused("https://192.168.1.10:8443/rx"),
			refused("https://100.64.0.1/rx"),
			refused("https://169.254.169.254/latest/meta-data/"),
			refused("https://[fd00:ec2::254]/latest/meta-data/"),
			refused("https://[::ffff:10.0.0.5]/rx"),
			refused("https://127.0.0.1:9000/rx"),
			refused("https://localhost:9000/rx"),
			refused("https://0.0.0.0:9000/rx"),
			accepted("https://93.184.216.34/rx"),
			accepted("https://hooks.internal.example/rx"),
		}},
		{name: "with allowed networks", networks: []string{"10.0.0.0/8", "fd00:ec2::/32"}, scenarios: []testsuite.Scenario{
			accepted("https://10.0.0.5/rx"),
			accepted("https://[fd00:ec2::254]/rx"),
			refused("https://192.168.1.10/rx"),
			refused("https://169.254.169.254/latest/meta-data/"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := testsuite.Start(t, testsuite.WithConfig(func(c *config.Config) { c.Webhooks.AllowedNetworks = tt.networks }))
			partnerID, _ := env.NewPartner(t)
			for i := range tt.scenarios {
				tt.scenarios[i].Path = env.AdminPath(endpointsPath)
				tt.scenarios[i].Token = env.AdminKey
				tt.scenarios[i].Body.(map[string]any)["partner_id"] = partnerID
			}
			testsuite.RunScenarios(t, env, tt.scenarios)
		})
	}
}

// TestWebhookDelivery follows one organization from registration to
// delivery: nothing is sent before validate, then every delivery carries
// the 6.2 envelope, verifies with the secret, and is in the event log.
func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	tn := env.NewTenant(t)
	hook := newHookReceiver(t)
	endpointID, secret := registerEndpoint(t, env, tn.PartnerID, hook.URL)
	hook.arm(secret)

	// Before validate: recorded as skipped, nothing sent.
	skippedSCID := prescribe(t, env, tn)
	skipped := eventOf(t, env, tn, skippedSCID)
	assert.Equal(t, "skipped", skipped["status"])
	assert.Equal(t, "organization_not_validated", skipped["skip_reason"])
	assert.Empty(t, skipped["attempts"])

	validate(t, env, tn)
	scid := prescribe(t, env, tn)
	d := hook.next(t)
	require.NoError(t, d.Err, "the receiver verified the signature")
	assert.Equal(t, http.StatusOK, d.Status)

	var body map[string]any
	require.NoError(t, json.Unmarshal(d.Body, &body))
	eventID, _ := body["event_id"].(string)
	assert.Equal(t, eventID, d.EventID, "X-Webhook-Id is the event_id")
	ts, _ := body["timestamp"].(string)
	_, err := time.Parse(time.RFC3339Nano, ts)
	assert.NoError(t, err, "timestamp is a date-time")
	assert.Equal(t, map[string]any{
		"event_type": "prescription.created", "event_id": eventID, "timestamp": ts,
		"partner_id": tn.PartnerID, "organization_id": tn.OrgID,
		"data": map[string]any{
			"patient_id": tn.PatientID, "partner_patient_id": body["data"].(map[string]any)["partner_patient_id"],
			"user_id": tn.Users[testsuite.RolePrescriber], "scid": scid,
		},
	}, body, "exactly the 6.2 envelope")
	assert.NotEmpty(t, body["data"].(map[string]any)["partner_patient_id"])
	assert.Equal(t, "application/json", d.Header.Get("Content-Type"))
	assert.Equal(t, "rxgate/"+app.Version, d.Header.Get("User-Agent"))
	assert.NoError(t, signature.Verify([]string{secret}, d.Signature, d.Body, time.Now()))

	r := waitFor(t, env, eventID, hasStatus("delivered"))
	var ev app.EventView
	r.DecodeData(t, &ev)
	assert.JSONEq(t, string(d.Body), string(ev.Payload), "the log holds the bytes that were sent")
	require.Len(t, ev.Attempts, 1)
	a := ev.Attempts[0]
	assert.Equal(t, endpointID, a.EndpointID)
	require.NotNil(t, a.StatusCode)
	assert.Equal(t, 200, *a.StatusCode)
	assert.Nil(t, a.Error)
	assert.GreaterOrEqual(t, a.DurationMS, int64(0))
	assert.WithinDuration(t, time.Now(), a.AttemptedAt, time.Minute)
	raw, _ := r.Get("data.attempts.0")
	assert.Subset(t, keys(raw.(map[string]any)), []string{"attempted_at", "endpoint_id", "status_code", "error", "duration_ms"})

	// The skipped event can be replayed now that the organization is
	// validated: the same event id, a fresh round.
	rr := env.MustAdmin(t, http.MethodPost, "/admin/v1/events/"+skipped["event_id"].(string)+"/replay", nil, http.StatusOK)
	assert.Equal(t, "pending", rr.String(t, "data.status"))
	d = hook.next(t)
	require.NoError(t, d.Err)
	assert.Equal(t, skipped["event_id"], d.EventID)
	waitFor(t, env, d.EventID, hasStatus("delivered"))

	// Replaying a delivered event sends it again.
	env.MustAdmin(t, http.MethodPost, "/admin/v1/events/"+eventID+"/replay", nil, http.StatusOK)
	d = hook.next(t)
	require.NoError(t, d.Err)
	assert.Equal(t, eventID, d.EventID)
	r = waitFor(t, env, eventID, func(r *testsuite.Response) bool {
		v, _ := r.Get("data.round")
		return hasStatus("delivered")(r) && v == float64(2)
	})
	r.DecodeData(t, &ev)
	assert.Len(t, ev.Attempts, 2, "both rounds' attempts are kept")
	hook.none(t)
}

// TestWebhookEveryEndpointOfThePartner: an event goes to each endpoint of
// the organization's partner, and to no other partner's.
func TestWebhookEveryEndpointOfThePartner(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	tn := env.NewTenant(t)
	other := env.NewTenant(t)
	first, second, stranger := newHookReceiver(t), newHookReceiver(t), newHookReceiver(t)
	_, s1 := registerEndpoint(t, env, tn.PartnerID, first.URL)
	_, s2 := registerEndpoint(t, env, tn.PartnerID, second.URL)
	_, s3 := registerEndpoint(t, env, other.PartnerID, stranger.URL)
	first.arm(s1)
	second.arm(s2)
	stranger.arm(s3)
	validate(t, env, tn)
	validate(t, env, other)

	scid := prescribe(t, env, tn)
	d1, d2 := first.next(t), second.next(t)
	require.NoError(t, d1.Err)
	require.NoError(t, d2.Err)
	assert.Equal(t, d1.EventID, d2.EventID)
	assert.Equal(t, d1.Body, d2.Body)
	ev := waitFor(t, env, d1.EventID, hasStatus("delivered"))
	targets, _ := ev.Get("data.targets")
	assert.Len(t, targets, 2)
	assert.Equal(t, d1.EventID, eventOf(t, env, tn, scid)["event_id"])

	// The other partner's own event reaches only its endpoint.
	prescribe(t, env, other)
	d3 := stranger.next(t)
	require.NoError(t, d3.Err)
	assert.NotEqual(t, d1.EventID, d3.EventID)
	first.none(t)
	second.none(t)
}

// TestWebhookFailures: a 5xx is retried to max_attempts, a 4xx fails at
// once, and both are in the event log as failed with every attempt.
func TestWebhookFailures(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	tests := []struct {
		name     string
		status   int
		attempts int
	}{
		{name: "500 is retried, then failed", status: 500, attempts: 3},
		{name: "404 fails at once", status: 404, attempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tn := env.NewTenant(t)
			hook := newHookReceiver(t)
			hook.respond = func(*receiver.Delivery) int { return tt.status }
			_, secret := registerEndpoint(t, env, tn.PartnerID, hook.URL)
			hook.arm(secret)
			validate(t, env, tn)
			scid := prescribe(t, env, tn)
			for range tt.attempts {
				d := hook.next(t)
				require.NoError(t, d.Err)
			}
			id := eventOf(t, env, tn, scid)["event_id"].(string)
			r := waitFor(t, env, id, hasStatus("failed"))
			var ev app.EventView
			r.DecodeData(t, &ev)
			require.Len(t, ev.Attempts, tt.attempts)
			for _, a := range ev.Attempts {
				require.NotNil(t, a.StatusCode)
				assert.Equal(t, tt.status, *a.StatusCode)
				require.NotNil(t, a.Error)
				assert.Equal(t, "HTTP "+strconv.Itoa(tt.status), *a.Error)
			}
			failed := listEvents(t, env, "status=failed&organization_id="+tn.OrgID)
			require.Len(t, failed, 1)
			assert.Equal(t, id, failed[0]["event_id"])
			hook.none(t)
		})
	}
}

// TestWebhookRotation: after a rotation, deliveries carry the new and the
// old signature, so receivers holding either verify.
func TestWebhookRotation(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	tn := env.NewTenant(t)
	hook := newHookReceiver(t)
	id, old := registerEndpoint(t, env, tn.PartnerID, hook.URL)
	r := env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+id+"/rotate-secret", nil, http.StatusOK)
	fresh := r.String(t, "data.secret")
	hook.arm(old) // a receiver not yet updated
	validate(t, env, tn)
	prescribe(t, env, tn)
	d := hook.next(t)
	require.NoError(t, d.Err, "the old secret still verifies during the grace period")
	assert.Equal(t, 2, strings.Count(d.Signature, "v1="), d.Signature)
	assert.NoError(t, signature.Verify([]string{fresh}, d.Signature, d.Body, time.Now()))
	p, err := signature.Parse(d.Signature)
	require.NoError(t, err)
	assert.Equal(t, signature.Compute(fresh, p.Timestamp, d.Body), hex.EncodeToString(p.Signatures[1]), "the old secret's signature comes first, the new one second")
}

// TestEventLogAPI covers the event list's filters, paging and errors, and
// replay's refusals.
func TestEventLogAPI(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	validated := env.NewTenant(t)
	unvalidated := env.NewTenant(t)
	hook := newHookReceiver(t)
	_, secret := registerEndpoint(t, env, validated.PartnerID, hook.URL)
	hook.arm(secret)
	validate(t, env, validated)
	for range 3 {
		prescribe(t, env, validated)
		hook.next(t)
		prescribe(t, env, unvalidated)
	}
	mine := listEvents(t, env, "organization_id="+validated.OrgID)
	require.Len(t, mine, 3)
	for _, e := range mine {
		waitFor(t, env, e["event_id"].(string), hasStatus("delivered"))
	}
	theirs := listEvents(t, env, "organization_id="+unvalidated.OrgID+"&status=skipped")
	require.Len(t, theirs, 3)
	assert.Empty(t, listEvents(t, env, "organization_id="+unvalidated.OrgID+"&status=delivered"))
	assert.Len(t, listEvents(t, env, "organization_id="+validated.OrgID+"&status=delivered"), 3)

	page := env.MustAdmin(t, http.MethodGet, "/admin/v1/events?limit=2&organization_id="+validated.OrgID, nil, http.StatusOK)
	var first []map[string]any
	page.DecodeData(t, &first)
	require.Len(t, first, 2)
	assert.Equal(t, mine[0]["event_id"], first[0]["event_id"], "oldest first")
	cursor := page.String(t, "pagination.lastKey")
	next := env.MustAdmin(t, http.MethodGet, "/admin/v1/events?limit=2&organization_id="+validated.OrgID+"&lastKey="+cursor, nil, http.StatusOK)
	var second []map[string]any
	next.DecodeData(t, &second)
	require.Len(t, second, 1)
	assert.Equal(t, mine[2]["event_id"], second[0]["event_id"])

	skippedID := theirs[0]["event_id"].(string)
	base := env.AdminPath("/admin/v1/events")
	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{Name: "unknown status", Path: base + "?status=lost", Token: env.AdminKey, Status: http.StatusBadRequest, Check: fieldsInclude("status")},
		{Name: "malformed organization", Path: base + "?organization_id=x", Token: env.AdminKey, Status: http.StatusBadRequest, Check: fieldsInclude("organization_id")},
		{Name: "limit too large", Path: base + "?limit=101", Token: env.AdminKey, Status: http.StatusBadRequest, Check: fieldsInclude("limit")},
		{Name: "cursor of another filter", Path: base + "?limit=2&lastKey=" + cursor, Token: env.AdminKey, Status: http.StatusBadRequest, Check: fieldsInclude("lastKey")},
		{Name: "unknown event", Path: base + "/" + uuid.NewString(), Token: env.AdminKey, Status: http.StatusNotFound},
		{Name: "malformed event id", Path: base + "/nope", Token: env.AdminKey, Status: http.StatusNotFound},
		{Name: "replay an unknown event", Method: http.MethodPost, Path: base + "/" + uuid.NewString() + "/replay", Token: env.AdminKey, Status: http.StatusNotFound},
		{Name: "replay before validate", Method: http.MethodPost, Path: base + "/" + skippedID + "/replay", Token: env.AdminKey,
			Status: http.StatusConflict, Contains: []string{"Validate has not succeeded"}},
		{Name: "without the admin key", Path: base, Status: http.StatusUnauthorized},
	})
	validate(t, env, unvalidated)
	testsuite.RunScenario(t, env, testsuite.Scenario{Name: "replay without an endpoint", Method: http.MethodPost,
		Path: base + "/" + skippedID + "/replay", Token: env.AdminKey, Status: http.StatusConflict, Contains: []string{"no webhook endpoint"}})
	hook.none(t)
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
