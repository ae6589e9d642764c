package testsuite_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// diagnosis is the data of a diagnose answer, as a client reads it.
type diagnosis struct {
	EventID  string `json:"event_id"`
	Verifies bool   `json:"verifies"`
	Findings []struct {
		Code        string   `json:"code"`
		Message     string   `json:"message"`
		SecretID    string   `json:"secret_id"`
		SkewSeconds *int64   `json:"skew_seconds"`
		Offset      *int     `json:"offset"`
		Classes     []string `json:"classes"`
	} `json:"findings"`
}

func (d diagnosis) codes() []string {
	out := []string{}
	for _, f := range d.Findings {
		out = append(out, f.Code)
	}
	return out
}

// TestWebhookDiagnose takes a real delivery as the receiver saw it,
// makes the mistakes real receivers make with it, and asks the operator
// API (and the console) why it does not verify.
func TestWebhookDiagnose(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	tn := env.NewTenant(t)
	hook := newHookReceiver(t)
	endpointID, secret := registerEndpoint(t, env, tn.PartnerID, hook.URL)
	hook.arm(secret)
	validate(t, env, tn)
	prescribe(t, env, tn)
	d := hook.next(t)
	require.NoError(t, d.Err)
	path := endpointsPath + "/" + endpointID + "/diagnose"
	at := d.ReceivedAt.UTC()
	diagnose := func(t *testing.T, body map[string]any) diagnosis {
		t.Helper()
		if _, ok := body["received_at"]; !ok {
			body["received_at"] = at.Format(time.RFC3339)
		}
		r := env.MustAdmin(t, http.MethodPost, path, body, http.StatusOK)
		var out diagnosis
		r.DecodeData(t, &out)
		assert.NotContains(t, string(r.Body), secret, "a diagnosis never shows the secret")
		return out
	}
	var decoded map[string]any
	require.NoError(t, json.Unmarshal(d.Body, &decoded))
	goRemarshal, err := json.Marshal(decoded) // a Go receiver's json.Marshal of the decoded body
	require.NoError(t, err)

	tests := []struct {
		name     string
		body     map[string]any
		verifies bool
		codes    []string
		classes  []string
		skew     int64
	}{
		{name: "as received", body: map[string]any{"signature": d.Signature, "body": string(d.Body)},
			verifies: true, codes: []string{"verifies"}},
		{name: "as received, in base64", body: map[string]any{"signature": d.Signature, "body_base64": base64.StdEncoding.EncodeToString(d.Body)},
			verifies: true, codes: []string{"verifies"}},
		{name: "Go's json.Marshal of the decoded body", body: map[string]any{"signature": d.Signature, "body": string(goRemarshal)},
			codes: []string{"body_differs"}, classes: []string{"member_order"}},
		{name: "a trailing newline", body: map[string]any{"signature": d.Signature, "body": string(d.Body) + "\n"},
			codes: []string{"body_differs"}, classes: []string{"trailing_newline"}},
		{name: "a proxy joined the header with a copy", body: map[string]any{"signature": d.Signature + ", " + d.Signature, "body": string(d.Body)},
			codes: []string{"header_joined", "signature_valid"}},
		{name: "a clock 10 minutes ahead", body: map[string]any{"signature": d.Signature, "body": string(d.Body),
			"received_at": time.Unix(signedAt(t, d.Signature), 0).Add(10 * time.Minute).UTC().Format(time.RFC3339)},
			codes: []string{"timestamp_outside_tolerance"}, skew: 600},
		{name: "an event id that does not exist", body: map[string]any{"signature": d.Signature, "body": string(d.Body), "event_id": "0193a0e0-0000-7000-8000-0000000000e1"},
			codes: []string{"event_not_found", "verifies"}, verifies: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diagnose(t, tt.body)
			assert.Equal(t, tt.codes, got.codes(), "%+v", got.Findings)
			assert.Equal(t, tt.verifies, got.Verifies)
			for _, f := range got.Findings {
				switch f.Code {
				case "verifies", "signature_valid":
					assert.Equal(t, "current", f.SecretID)
				case "body_differs":
					assert.Equal(t, tt.classes, f.Classes, f.Message)
					assert.NotNil(t, f.Offset)
				case "timestamp_outside_tolerance":
					require.NotNil(t, f.SkewSeconds)
					assert.Equal(t, tt.skew, *f.SkewSeconds)
				}
			}
		})
	}

	t.Run("another partner's event is not found", func(t *testing.T) {
		other := env.NewTenant(t)
		theirs := eventOf(t, env, other, prescribe(t, env, other))
		got := diagnose(t, map[string]any{"signature": d.Signature, "body": string(d.Body), "event_id": theirs["event_id"]})
		assert.Equal(t, []string{"event_not_found", "verifies"}, got.codes())
		_, key := operatorKey(t, env, "partner:"+other.PartnerID)
		r := env.Do(t, testsuite.Request{Method: http.MethodPost, URL: env.AdminPath(path), Token: key,
			Body: map[string]any{"signature": d.Signature, "body": string(d.Body)}})
		assert.Equal(t, http.StatusNotFound, r.Status, "a partner key diagnoses its own endpoints only: %s", r.Body)
	})

	t.Run("a bad request", func(t *testing.T) {
		r := env.Admin(t, http.MethodPost, path, map[string]any{"signature": d.Signature, "body": "x", "body_base64": "eA=="})
		assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
		assert.Contains(t, r.ValidationFields(), "body")
		r = env.Admin(t, http.MethodPost, path, map[string]any{"signature": d.Signature, "body_base64": "%%%"})
		assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
		assert.Contains(t, r.ValidationFields(), "body_base64")
	})

	t.Run("console", func(t *testing.T) {
		c := newConsole(t, env)
		csrf := c.signIn()
		list := c.get("/console/endpoints")
		assert.Contains(t, list.body, "/console/endpoints/"+endpointID+"/diagnose")
		form := c.get("/console/endpoints/" + endpointID + "/diagnose")
		require.Equal(t, http.StatusOK, form.status, form.body)
		p := c.post("/console/endpoints/"+endpointID+"/diagnose", url.Values{"csrf": {csrf},
			"signature": {d.Signature}, "body": {string(d.Body) + "\r\n"}, "received_at": {at.Format(time.RFC3339)}})
		require.Equal(t, http.StatusOK, p.status, p.body)
		assert.Contains(t, p.body, "does not verify")
		assert.Contains(t, p.body, "body_differs")
		assert.Contains(t, p.body, "trailing_newline")
		assert.NotContains(t, p.body, secret)
	})

	// Last, as it changes the endpoint: after a rotation the delivery's
	// signature was made with the secret rotated out.
	t.Run("a rotated-out secret", func(t *testing.T) {
		env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+endpointID+"/rotate-secret", nil, http.StatusOK)
		got := diagnose(t, map[string]any{"signature": d.Signature, "body": string(d.Body)})
		assert.Equal(t, []string{"secret_rotated_out"}, got.codes(), "%+v", got.Findings)
		assert.False(t, got.Verifies)
		assert.Equal(t, "previous", got.Findings[0].SecretID)
	})
}

// signedAt is the t of a signature header.
func signedAt(t testing.TB, header string) int64 {
	t.Helper()
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(part, "t="); ok {
			var ts int64
			require.NoError(t, json.Unmarshal([]byte(v), &ts))
			return ts
		}
	}
	t.Fatalf("no t in %q", header)
	return 0
}
