package testsuite_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// TestOperatorOverview: GET /admin/v1/overview counts what the store
// holds. It needs a server of its own, since the counts are the whole
// store's.
func TestOperatorOverview(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	env.RequireInProcess(t)
	type overview struct {
		Organizations int            `json:"organizations"`
		Users         int            `json:"users"`
		Events        map[string]int `json:"events"`
		Jobs          *struct {
			Pending, Leased      int
			OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
		} `json:"jobs"`
		DeliveriesLastHour map[string]int `json:"deliveries_last_hour"`
		LastBackupAt       *string        `json:"last_backup_at"`
		Estimated          *bool          `json:"estimated"`
	}
	read := func() overview {
		t.Helper()
		var o overview
		env.MustAdmin(t, http.MethodGet, "/admin/v1/overview", nil, http.StatusOK).DecodeData(t, &o)
		return o
	}
	zero := map[string]int{"skipped": 0, "pending": 0, "delivered": 0, "failed": 0}
	empty := read()
	assert.Equal(t, 0, empty.Organizations)
	assert.Equal(t, 0, empty.Users)
	assert.Equal(t, zero, empty.Events)
	require.NotNil(t, empty.Jobs, "the server's own queue is seen")
	assert.Zero(t, empty.Jobs.Pending)
	assert.Equal(t, map[string]int{"delivered": 0, "retry": 0, "failed": 0}, empty.DeliveriesLastHour)
	assert.Nil(t, empty.LastBackupAt, "no backup has been taken")
	require.NotNil(t, empty.Estimated)
	assert.False(t, *empty.Estimated, "a few records are counted exactly")

	a, b := env.NewTenant(t), env.NewTenant(t)
	prescribe(t, env, a)
	prescribe(t, env, a)
	prescribe(t, env, b)
	got := read()
	assert.Equal(t, 2, got.Organizations)
	assert.Equal(t, 2*len(testsuite.Roles), got.Users)
	assert.Equal(t, map[string]int{"skipped": 3, "pending": 0, "delivered": 0, "failed": 0}, got.Events,
		"the organizations are not validated: their events are skipped")
}

// TestOperatorOrganizationUsers: GET /admin/v1/organizations/{id}/users
// pages through the organization's users, each in full, and only its own.
func TestOperatorOrganizationUsers(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	a, b := env.NewTenant(t), env.NewTenant(t)
	users := a.OrgPath() + "/users"

	var ids []string
	for cursor := ""; ; {
		path := users + "?limit=3"
		if cursor != "" {
			path += "&lastKey=" + cursor
		}
		r := env.MustAdmin(t, http.MethodGet, path, nil, http.StatusOK)
		var page []struct {
			UserID string `json:"user_id"`
			Role   string `json:"role"`
			Status string `json:"status"`
			Email  string `json:"email"`
		}
		r.DecodeData(t, &page)
		for _, u := range page {
			ids = append(ids, u.UserID)
			assert.Equal(t, a.Users[u.Role], u.UserID, "each user carries its role")
			assert.Equal(t, "enabled", u.Status)
			assert.Equal(t, a.Emails[u.Role], u.Email)
		}
		next, _ := r.Get("pagination.lastKey")
		if next == nil {
			break
		}
		cursor = next.(string)
	}
	want := make([]string, 0, len(testsuite.Roles))
	for _, role := range testsuite.Roles {
		want = append(want, a.Users[role])
	}
	assert.Equal(t, want, ids, "every user of the organization, in creation order, and none of another's")

	bCursor := env.MustAdmin(t, http.MethodGet, b.OrgPath()+"/users?limit=1", nil, http.StatusOK)
	key := bCursor.String(t, "pagination.lastKey")
	testsuite.RunScenarios(t, env, []testsuite.Scenario{
		{Name: "unknown organization", Path: env.AdminPath("/admin/v1/organizations/" + "00000000-0000-4000-8000-000000000000/users"),
			Token: env.AdminKey, Status: http.StatusNotFound},
		{Name: "limit out of range", Path: env.AdminPath(users + "?limit=101"), Token: env.AdminKey,
			Status: http.StatusBadRequest, Check: fieldsInclude("limit")},
		{Name: "another organization's cursor", Path: env.AdminPath(users + "?lastKey=" + key), Token: env.AdminKey,
			Status: http.StatusBadRequest, Check: fieldsInclude("lastKey")},
		{Name: "no key", Path: env.AdminPath(users), Status: http.StatusUnauthorized, Slug: slugAuth},
	})
}
