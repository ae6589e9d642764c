package testsuite_test

import (
	"net/http"
	"strings"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/signature"
)

// TestWebhookStandardScheme registers an endpoint on the Standard
// Webhooks scheme, checks its secret is shown as whsec_, and verifies its
// deliveries with the reference Go library (independent of rxgate),
// before and during a rotation; PATCH switches an endpoint's scheme and
// shows the same key in the new form; bad input is the error envelope.
func TestWebhookStandardScheme(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	tn := env.NewTenant(t)
	hook := newHookReceiver(t)
	r := env.MustAdmin(t, http.MethodPost, endpointsPath,
		map[string]any{"partner_id": tn.PartnerID, "url": hook.URL, "signature_scheme": "standard"}, http.StatusCreated)
	id, secret := r.String(t, "data.endpoint_id"), r.String(t, "data.secret")
	require.True(t, strings.HasPrefix(secret, "whsec_"), secret)
	assert.Equal(t, "standard", r.String(t, "data.signature_scheme"))
	got := env.MustAdmin(t, http.MethodGet, endpointsPath+"/"+id, nil, http.StatusOK)
	assert.Equal(t, "standard", got.String(t, "data.signature_scheme"))
	_, hasSecret := got.Get("data.secret")
	assert.False(t, hasSecret)

	hook.arm(secret)
	validate(t, env, tn)
	prescribe(t, env, tn)
	d := hook.next(t)
	require.NoError(t, d.Err)
	require.True(t, d.Standard)
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(d.Body, d.Header), "the reference library verifies the delivery")
	assert.Empty(t, d.Header.Get(signature.HeaderName))
	waitFor(t, env, d.EventID, hasStatus("delivered"))

	rot := env.MustAdmin(t, http.MethodPost, endpointsPath+"/"+id+"/rotate-secret", nil, http.StatusOK)
	fresh := rot.String(t, "data.secret")
	require.True(t, strings.HasPrefix(fresh, "whsec_"), fresh)
	prescribe(t, env, tn)
	d = hook.next(t)
	require.NoError(t, d.Err, "the old secret still verifies during the grace period")
	assert.Len(t, strings.Fields(d.Header.Get("webhook-signature")), 2)
	for _, s := range []string{secret, fresh} {
		wh, err := standardwebhooks.NewWebhook(s)
		require.NoError(t, err)
		assert.NoError(t, wh.Verify(d.Body, d.Header), "either secret verifies during the rotation")
	}

	// The default, then a switch.
	other := newHookReceiver(t)
	id2, plain := registerEndpoint(t, env, tn.PartnerID, other.URL)
	assert.False(t, strings.HasPrefix(plain, "whsec_"))
	same := env.MustAdmin(t, http.MethodPatch, endpointsPath+"/"+id2, map[string]any{"signature_scheme": "rxgate"}, http.StatusOK)
	_, hasSecret = same.Get("data.secret")
	assert.False(t, hasSecret, "no change, no secret")
	sw := env.MustAdmin(t, http.MethodPatch, endpointsPath+"/"+id2, map[string]any{"signature_scheme": "standard"}, http.StatusOK)
	assert.Equal(t, "standard", sw.String(t, "data.signature_scheme"))
	assert.Equal(t, signature.StandardSecret(plain), sw.String(t, "data.secret"), "the same key in the whsec_ form")
	back := env.MustAdmin(t, http.MethodPatch, endpointsPath+"/"+id2, map[string]any{"signature_scheme": "rxgate"}, http.StatusOK)
	assert.Equal(t, plain, back.String(t, "data.secret"))

	for _, body := range []map[string]any{{"signature_scheme": "svix"}, {"signature_scheme": ""}} {
		bad := env.Admin(t, http.MethodPatch, endpointsPath+"/"+id2, body)
		require.Equal(t, http.StatusUnprocessableEntity, bad.Status, "%s", bad.Body)
		assert.Equal(t, []string{"signature_scheme"}, bad.ValidationFields())
	}
	bad := env.Admin(t, http.MethodPost, endpointsPath, map[string]any{"partner_id": tn.PartnerID, "url": other.URL + "x", "signature_scheme": "hmac"})
	require.Equal(t, http.StatusUnprocessableEntity, bad.Status, "%s", bad.Body)
	assert.Equal(t, []string{"signature_scheme"}, bad.ValidationFields())
	missing := env.Admin(t, http.MethodPatch, endpointsPath+"/00000000-0000-4000-8000-000000000000", map[string]any{"signature_scheme": "standard"})
	assert.Equal(t, http.StatusNotFound, missing.Status)
}
