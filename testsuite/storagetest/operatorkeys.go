package storagetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// testOperatorKeys covers the operator keys: create with a unique name,
// get, list, and revoke, which holds at once and keeps its first time.
func testOperatorKeys(t *testing.T, e *env) {
	ctx := t.Context()
	secret := storage.NewSecret()
	first := &storage.OperatorKey{Name: "ci", Role: "operator", SecretHash: storage.HashSecret(secret)}
	require.NoError(t, e.s.CreateOperatorKey(ctx, first))
	require.NotEmpty(t, first.ID)
	require.False(t, first.CreatedAt.IsZero(), "the store sets the creation time")
	second := &storage.OperatorKey{Name: "Partner desk", Role: "partner:" + storage.NewID(), SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(t, e.s.CreateOperatorKey(ctx, second))

	got, err := e.s.GetOperatorKey(ctx, first.ID)
	require.NoError(t, err)
	requireEqual(t, first, got)
	require.True(t, storage.SecretMatches(got.SecretHash, secret))
	require.False(t, got.Revoked())

	all, err := e.s.ListOperatorKeys(ctx)
	require.NoError(t, err)
	requireEqual(t, []storage.OperatorKey{*first, *second}, all, "generated ids list in creation order")

	for name, k := range map[string]*storage.OperatorKey{
		"same name": {Name: "ci", Role: "viewer", SecretHash: storage.HashSecret(storage.NewSecret())},
		"same id":   {ID: first.ID, Name: "other", Role: "viewer", SecretHash: storage.HashSecret(storage.NewSecret())},
	} {
		require.ErrorIs(t, e.s.CreateOperatorKey(ctx, k), storage.ErrAlreadyExists, name)
	}
	got, err = e.s.GetOperatorKey(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, "operator", got.Role, "a refused create must not overwrite")

	revoked, err := e.s.RevokeOperatorKey(ctx, first.ID)
	require.NoError(t, err)
	require.True(t, revoked.Revoked())
	got, err = e.s.GetOperatorKey(ctx, first.ID)
	require.NoError(t, err)
	requireEqual(t, revoked, got, "a revocation is read back at once")
	again, err := e.s.RevokeOperatorKey(ctx, first.ID)
	require.NoError(t, err)
	requireEqual(t, revoked.RevokedAt, again.RevokedAt, "revoking again keeps the first time")
	other, err := e.s.GetOperatorKey(ctx, second.ID)
	require.NoError(t, err)
	require.False(t, other.Revoked(), "revoking one key leaves the others")

	err = e.s.CreateOperatorKey(ctx, &storage.OperatorKey{Name: "ci", Role: "viewer", SecretHash: storage.HashSecret(storage.NewSecret())})
	require.ErrorIs(t, err, storage.ErrAlreadyExists, "a revoked key's name stays taken")

	for _, id := range []string{"unknown", "a/b", ""} {
		_, err = e.s.GetOperatorKey(ctx, id)
		require.ErrorIs(t, err, storage.ErrNotFound, id)
		_, err = e.s.RevokeOperatorKey(ctx, id)
		require.ErrorIs(t, err, storage.ErrNotFound, id)
	}
}
