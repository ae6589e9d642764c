package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

func TestWebhookEndpoints(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	p1 := storage.Partner{Name: "One"}
	p2 := storage.Partner{Name: "Two"}
	require.NoError(t, s.CreatePartner(ctx, &p1))
	require.NoError(t, s.CreatePartner(ctx, &p2))

	a := storage.WebhookEndpoint{PartnerID: p1.ID, URL: "https://one.example/hooks", Secret: "secret-a"}
	require.NoError(t, s.CreateWebhookEndpoint(ctx, &a))
	assert.NotEmpty(t, a.ID)
	assert.False(t, a.CreatedAt.IsZero())
	b := storage.WebhookEndpoint{PartnerID: p1.ID, URL: "https://two.example/hooks", Secret: "secret-b"}
	require.NoError(t, s.CreateWebhookEndpoint(ctx, &b))
	c := storage.WebhookEndpoint{PartnerID: p2.ID, URL: "https://one.example/hooks", Secret: "secret-c"}
	require.NoError(t, s.CreateWebhookEndpoint(ctx, &c), "another partner may use the same url")

	dup := storage.WebhookEndpoint{PartnerID: p1.ID, URL: a.URL, Secret: "x"}
	assert.ErrorIs(t, s.CreateWebhookEndpoint(ctx, &dup), storage.ErrAlreadyExists, "one url twice for one partner")
	orphan := storage.WebhookEndpoint{PartnerID: storage.NewID(), URL: "https://x.example", Secret: "x"}
	assert.ErrorIs(t, s.CreateWebhookEndpoint(ctx, &orphan), storage.ErrNotFound)
	bad := storage.WebhookEndpoint{PartnerID: "a/b", URL: "https://x.example", Secret: "x"}
	assert.ErrorIs(t, s.CreateWebhookEndpoint(ctx, &bad), storage.ErrNotFound)

	got, err := s.GetWebhookEndpoint(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, a, *got, "the secret is stored as it is: signing needs it")

	all, err := s.ListWebhookEndpoints(ctx, "")
	require.NoError(t, err)
	assert.Len(t, all, 3)
	mine, err := s.ListWebhookEndpoints(ctx, p1.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID, b.ID}, endpointIDs(mine))
	none, err := s.ListWebhookEndpoints(ctx, "a/b")
	require.NoError(t, err)
	assert.Empty(t, none)

	require.NoError(t, s.DeleteWebhookEndpoint(ctx, b.ID))
	assert.ErrorIs(t, s.DeleteWebhookEndpoint(ctx, b.ID), storage.ErrNotFound)
	_, err = s.GetWebhookEndpoint(ctx, b.ID)
	assert.ErrorIs(t, err, storage.ErrNotFound)
	mine, err = s.ListWebhookEndpoints(ctx, p1.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID}, endpointIDs(mine))
	again := storage.WebhookEndpoint{PartnerID: p1.ID, URL: b.URL, Secret: "y"}
	assert.NoError(t, s.CreateWebhookEndpoint(ctx, &again), "a deleted endpoint's url is free again")
}

func TestRotateWebhookSecret(t *testing.T) {
	t.Parallel()
	s := openInMemory(t, storage.Options{Now: newClock().Now})
	ctx := t.Context()
	p := storage.Partner{Name: "P"}
	require.NoError(t, s.CreatePartner(ctx, &p))
	e := storage.WebhookEndpoint{PartnerID: p.ID, URL: "https://p.example", Secret: "first"}
	require.NoError(t, s.CreateWebhookEndpoint(ctx, &e))
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	assert.Equal(t, []string{"first"}, e.SigningSecrets(now))

	r, err := s.RotateWebhookSecret(ctx, e.ID, "second", now.Add(24*time.Hour))
	require.NoError(t, err)
	assert.NotNil(t, r.RotatedAt)
	assert.Equal(t, []string{"first", "second"}, r.SigningSecrets(now), "old first, new second during the grace period")
	assert.Equal(t, []string{"first", "second"}, r.SigningSecrets(now.Add(24*time.Hour-time.Nanosecond)))
	assert.Equal(t, []string{"second"}, r.SigningSecrets(now.Add(24*time.Hour)), "the old secret stops when the grace period ends")

	r, err = s.RotateWebhookSecret(ctx, e.ID, "third", now.Add(24*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, []string{"second", "third"}, r.SigningSecrets(now), "at most two: the oldest stops at once")
	got, err := s.GetWebhookEndpoint(ctx, e.ID)
	require.NoError(t, err)
	assert.Equal(t, r, got)

	r, err = s.RotateWebhookSecret(ctx, e.ID, "fourth", now)
	require.NoError(t, err)
	assert.Equal(t, []string{"fourth"}, r.SigningSecrets(now), "no grace period")

	_, err = s.RotateWebhookSecret(ctx, storage.NewID(), "x", now)
	assert.ErrorIs(t, err, storage.ErrNotFound)
}

func endpointIDs(es []storage.WebhookEndpoint) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}
