package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/storage"
	"github.com/rxgate/rxgate/storage/badger"
)

// listCountingStore counts the prescription pages read from the store; it
// keeps the store's change stamps (badger.Store's ChangeStamp, embedded).
type listCountingStore struct {
	*badger.Store
	lists atomic.Int32
}

func (s *listCountingStore) ListPrescriptionsJSON(ctx context.Context, orgID, userID, patientID string, req storage.PageRequest, dst []byte) (*storage.Patient, []byte, storage.PageInfo, error) {
	s.lists.Add(1)
	return s.Store.ListPrescriptionsJSON(ctx, orgID, userID, patientID, req, dst)
}

// TestRememberedPage: a 200 of a first page whose change stamp has not
// moved is answered from the remembered page without reading the store,
// with the bytes a read gives (apart from the envelope's timestamp and
// requestId) and the same tag; a write moves the stamp and the next
// answer reads the store and shows it.
func TestRememberedPage(t *testing.T) {
	var counting *listCountingStore
	ba := newBenchAppOver(t, 3, false, func(s *badger.Store) storage.Store {
		counting = &listCountingStore{Store: s}
		return counting
	})
	h := ba.app.PartnerHandler()
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, ba.pageRequest())
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		return rec
	}
	first := get()
	require.EqualValues(t, 1, counting.lists.Load())
	second := get()
	require.EqualValues(t, 1, counting.lists.Load(), "the unchanged page was read again")
	require.Equal(t, first.Header().Get("ETag"), second.Header().Get("ETag"))
	require.Equal(t, app.PageETag(ba.org, second.Body.Bytes()), second.Header().Get("ETag"), "the tag of the bytes sent")
	require.Equal(t, first.Header().Get("Content-Length"), second.Header().Get("Content-Length"))
	require.Equal(t, first.Header().Get("Deprecation"), second.Header().Get("Deprecation"))
	require.Equal(t, stable(t, first.Body.Bytes()), stable(t, second.Body.Bytes()))

	rx := &storage.Prescription{OrgID: ba.org, UserID: ba.user, PatientID: ba.patient,
		PrescriptionItem: storage.PrescriptionItem{ItemName: "Ibuprofen", ItemStrength: "200 mg", ItemForm: "tablet",
			RouteAdministration: "oral", Quantity: "10", NumberOfRepeatsAuthorised: "0", ScheduleNumber: "2",
			PatientInstructions: "One tablet as needed", PrescriberScriptNumber: "100201"},
		Delivery: storage.Delivery{Method: "SMS", RecipientType: "PATIENT", Destination: "0412345678"}}
	rx.URL = "https://rx.example/scripts/" + rx.SCID
	require.NoError(t, ba.store.CreatePrescription(context.Background(), rx))
	third := get()
	require.EqualValues(t, 2, counting.lists.Load(), "the page was not read after a write")
	require.Contains(t, third.Body.String(), rx.SCID)
	require.NotEqual(t, first.Header().Get("ETag"), third.Header().Get("ETag"))
	fourth := get()
	require.EqualValues(t, 2, counting.lists.Load())
	require.Equal(t, stable(t, third.Body.Bytes()), stable(t, fourth.Body.Bytes()))

	// Another page (another limit) is its own entry.
	rec := httptest.NewRecorder()
	req := ba.pageRequest()
	req.URL.RawQuery = "limit=2"
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.EqualValues(t, 3, counting.lists.Load())
	require.Contains(t, rec.Body.String(), `"hasNext":true`)
}

// stable is body without the envelope's per-answer members.
func stable(t *testing.T, body []byte) string {
	t.Helper()
	head, tail := app.StableParts(body)
	require.NotEmpty(t, tail, "the page has no pagination")
	return string(head) + string(tail)
}
