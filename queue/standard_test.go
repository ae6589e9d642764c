package queue_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
)

// TestStandardWebhooksDelivery checks an endpoint on the Standard Webhooks
// scheme with the reference Go library (an implementation independent of
// rxgate's): one signature outside a rotation, two during one (old and
// new, each verifying alone), none after, webhook-id the event id, and no
// rxgate signature header.
func TestStandardWebhooksDelivery(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, nil)
	h := newHarness(t, withFakeClock())
	e := h.endpoint(rec.server.URL)
	e2, err := h.store.SetWebhookSignatureScheme(t.Context(), e.ID, storage.SchemeStandard)
	require.NoError(t, err)
	require.Equal(t, storage.SchemeStandard, e2.SignatureScheme)
	oldW := signature.StandardSecret(e.Secret)

	id := h.prescribe()
	require.Equal(t, "delivered", h.next().Outcome)
	rotated, err := h.store.RotateWebhookSecret(t.Context(), e.ID, storage.NewSecret(), h.clock.Now().Add(24*time.Hour))
	require.NoError(t, err)
	newW := signature.StandardSecret(rotated.Secret)
	h.prescribe()
	require.Equal(t, "delivered", h.next().Outcome)
	h.clock.Advance(24 * time.Hour)
	h.prescribe()
	require.Equal(t, "delivered", h.next().Outcome)

	got := rec.got()
	require.Len(t, got, 3)
	verify := func(whsec string, i int) error {
		wh, err := standardwebhooks.NewWebhook(whsec)
		require.NoError(t, err)
		// The fake clock is not the library's: its tolerance is checked
		// against the timestamp sent below.
		return wh.VerifyIgnoringTimestamp(got[i].body, got[i].header)
	}
	first := got[0].header
	assert.Equal(t, id, first.Get("webhook-id"))
	assert.Equal(t, strconv.FormatInt(h.clock.Now().Add(-24*time.Hour).Unix(), 10), first.Get("webhook-timestamp"))
	assert.Empty(t, first.Get(signature.HeaderName), "no rxgate signature")
	assert.Empty(t, first.Get("X-Webhook-Id"))
	assert.Len(t, strings.Fields(first.Get("webhook-signature")), 1)
	assert.NoError(t, verify(oldW, 0))
	assert.Error(t, verify(newW, 0))

	during := got[1].header.Get("webhook-signature")
	assert.Len(t, strings.Fields(during), 2, during)
	assert.NoError(t, verify(oldW, 1), "the old secret verifies during the rotation")
	assert.NoError(t, verify(newW, 1), "and the new one")

	assert.Len(t, strings.Fields(got[2].header.Get("webhook-signature")), 1)
	assert.NoError(t, verify(newW, 2))
	assert.Error(t, verify(oldW, 2), "the old secret stops with its grace period")
	assert.NoError(t, signature.VerifyStandard([]string{newW}, signature.StandardRequestOf(got[2].header, got[2].body), h.clock.Now()))
}
