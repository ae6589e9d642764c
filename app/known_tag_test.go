package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app"
	"github.com/rxgate/rxgate/storage"
)

// TestKnownPageTag: a 200 of a first page whose tag is remembered sends
// that tag without hashing the page again; it is the tag of the bytes
// sent, before and after a write moves the user's change stamp.
func TestKnownPageTag(t *testing.T) {
	ba := newBenchApp(t, 3)
	h := ba.app.PartnerHandler()
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, ba.pageRequest())
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, app.PageETag(ba.org, rec.Body.Bytes()), rec.Header().Get("ETag"), "the tag of the bytes sent")
		return rec
	}
	first := get()
	second := get() // from the remembered tag
	require.Equal(t, first.Header().Get("ETag"), second.Header().Get("ETag"))
	rx := &storage.Prescription{OrgID: ba.org, UserID: ba.user, PatientID: ba.patient,
		PrescriptionItem: storage.PrescriptionItem{ItemName: "Ibuprofen", ItemStrength: "200 mg", ItemForm: "tablet",
			RouteAdministration: "oral", Quantity: "10", NumberOfRepeatsAuthorised: "0", ScheduleNumber: "2",
			PatientInstructions: "One tablet as needed", PrescriberScriptNumber: "100201"},
		Delivery: storage.Delivery{Method: "SMS", RecipientType: "PATIENT", Destination: "0412345678"}}
	rx.URL = "https://rx.example/scripts/" + rx.SCID
	require.NoError(t, ba.store.CreatePrescription(context.Background(), rx))
	third := get()
	require.NotEqual(t, second.Header().Get("ETag"), third.Header().Get("ETag"), "the write changed the page")
	fourth := get()
	require.Equal(t, third.Header().Get("ETag"), fourth.Header().Get("ETag"))
}
