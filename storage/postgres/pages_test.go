package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/postgres"
)

// TestRememberedPageChecked: a process serves a prescription page it read
// before only while the database holds the very rows it was built from.
// Another process's writes (a prescription changed on the page, one
// created before it, the patient changed) show in
// the next read, first page or a cursor's; each read is one round trip,
// and so is the member's read with it, which shows a disable and a
// secret rotation at once.
func TestRememberedPageChecked(t *testing.T) {
	t.Parallel()
	a, b, tr, w := twoProcesses(t)
	ctx := t.Context()
	org, user, patient := w.Organization, w.User, w.Patient
	n := 0
	create := func() string {
		t.Helper()
		n++
		rx := w.Prescription()
		rx.PrescriptionItem = storage.PrescriptionItem{ItemName: fmt.Sprint("Item ", n), Quantity: "1"}
		require.NoError(t, b.CreatePrescription(ctx, &rx))
		return rx.SCID
	}
	for range 4 {
		create()
	}

	type item struct {
		SCID     string `json:"scid"`
		ItemName string `json:"item_name"`
	}
	// page reads a page on a, twice, and checks that the second read
	// answers the same and that each took one round trip.
	page := func(req storage.PageRequest) (*storage.Patient, []item, storage.PageInfo) {
		t.Helper()
		var p *storage.Patient
		var raw []byte
		var info storage.PageInfo
		var reads [2][]byte
		for i := range reads {
			sent := tr.measure(t, func(ctx context.Context) {
				var err error
				p, raw, info, err = a.ListPrescriptionsJSON(ctx, org.ID, user.ID, patient.ID, req, nil)
				require.NoError(t, err)
			})
			require.Len(t, sent, 1, "a page's round trips")
			reads[i] = raw
		}
		require.Equal(t, string(reads[0]), string(reads[1]))
		var items []item
		require.NoError(t, json.Unmarshal(raw, &items))
		return p, items, info
	}
	names := func(items []item) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.ItemName)
		}
		return out
	}

	first := storage.PageRequest{Limit: 2}
	// Warm the statement cache (a statement's first use prepares it).
	_, _, _, err := a.ListPrescriptionsJSON(ctx, org.ID, user.ID, patient.ID, first, nil)
	require.NoError(t, err)
	_, err = a.GetMemberPrescriptionsJSON(ctx, org.ID, user.ID, user.ID, patient.ID, first, nil)
	require.NoError(t, err)
	_, items, info := page(first)
	require.Equal(t, []string{"Item 4", "Item 3"}, names(items))
	require.True(t, info.HasNext)
	second := storage.PageRequest{Limit: 2, Cursor: info.LastKey}
	_, items, info = page(second)
	require.Equal(t, []string{"Item 2", "Item 1"}, names(items))
	require.False(t, info.HasNext)

	// A prescription on the first page changed by another process.
	_, err = b.UpdatePrescription(ctx, org.ID, user.ID, patient.ID, mustFirst(t, a, org.ID, user.ID, patient.ID), func(p *storage.Prescription) error {
		p.ItemName = "Item 4, changed"
		return nil
	})
	require.NoError(t, err)
	_, items, _ = page(first)
	require.Equal(t, []string{"Item 4, changed", "Item 3"}, names(items))

	// One created before it.
	create()
	_, items, info = page(first)
	require.Equal(t, []string{"Item 5", "Item 4, changed"}, names(items))
	require.True(t, info.HasNext)

	// The second page, changed by the row before it.
	_, items, _ = page(storage.PageRequest{Limit: 2, Cursor: info.LastKey})
	require.Equal(t, []string{"Item 3", "Item 2"}, names(items))

	// A page that was the whole list, and then is not.
	all := storage.PageRequest{Limit: 6}
	_, items, info = page(all)
	require.Len(t, items, 5)
	require.False(t, info.HasNext)
	create()
	create()
	_, items, info = page(all)
	require.Equal(t, "Item 7", items[0].ItemName)
	require.Len(t, items, 6)
	require.True(t, info.HasNext)

	// The patient.
	given := "Ada"
	_, err = b.UpdatePatient(ctx, org.ID, user.ID, patient.ID, func(p *storage.Patient) error {
		p.GivenName = &given
		return nil
	})
	require.NoError(t, err)
	p, _, _ := page(first)
	require.NotNil(t, p.GivenName)
	require.Equal(t, given, *p.GivenName)

	// The member, read with the page in one round trip.
	member := func() *storage.MemberPage {
		t.Helper()
		var mp *storage.MemberPage
		sent := tr.measure(t, func(ctx context.Context) {
			var err error
			mp, err = a.GetMemberPrescriptionsJSON(ctx, org.ID, user.ID, user.ID, patient.ID, first, nil)
			require.NoError(t, err)
		})
		require.Len(t, sent, 1, "the member and the page's round trips")
		require.NoError(t, mp.PageErr)
		var items []item
		require.NoError(t, json.Unmarshal(mp.Items, &items))
		require.Equal(t, []string{"Item 7", "Item 6"}, names(items))
		return mp
	}
	mp := member()
	require.False(t, mp.User.Disabled)
	require.Equal(t, org.PartnerID, mp.Org.PartnerID)
	_, _, err = b.SetUserDisabled(ctx, org.ID, user.ID, true)
	require.NoError(t, err)
	require.True(t, member().User.Disabled, "a disable by another process")
	hash := storage.HashSecret("rotated")
	_, err = b.SetOrganizationSecret(ctx, org.ID, hash)
	require.NoError(t, err)
	require.True(t, storage.SecretMatches(member().Org.SecretHash, "rotated"), "a rotation by another process")

	// Unknown member, unknown patient.
	_, err = a.GetMemberPrescriptionsJSON(ctx, org.ID, storage.NewID(), user.ID, patient.ID, first, nil)
	require.ErrorIs(t, err, storage.ErrNotFound)
	mp, err = a.GetMemberPrescriptionsJSON(ctx, org.ID, user.ID, user.ID, storage.NewID(), first, nil)
	require.NoError(t, err)
	require.Equal(t, user.ID, mp.User.ID)
	require.ErrorIs(t, mp.PageErr, storage.ErrNotFound)
}

// mustFirst is the scid of the first prescription of the patient's list,
// read on s.
func mustFirst(t *testing.T, s *postgres.Store, orgID, userID, patientID string) string {
	t.Helper()
	_, raw, _, err := s.ListPrescriptionsJSON(t.Context(), orgID, userID, patientID, storage.PageRequest{Limit: 1}, nil)
	require.NoError(t, err)
	var items []struct {
		SCID string `json:"scid"`
	}
	require.NoError(t, json.Unmarshal(raw, &items))
	require.Len(t, items, 1)
	return items[0].SCID
}
