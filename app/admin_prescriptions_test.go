package app

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

func TestPrescriptionCreateRequestValidate(t *testing.T) {
	t.Parallel()
	valid := func() PrescriptionCreateRequest {
		return PrescriptionCreateRequest{
			PrescriptionItem: storage.PrescriptionItem{ItemName: "Amoxicillin", Quantity: "20"},
			Delivery:         DeliveryInput{Method: "SMS", RecipientType: "PATIENT", Destination: "0412345678"},
		}
	}
	long := strings.Repeat("x", maxFreeText+1)
	tests := []struct {
		name   string
		change func(*PrescriptionCreateRequest)
		want   map[string]string // field -> message; nil: valid
	}{
		{name: "valid", change: func(*PrescriptionCreateRequest) {}},
		{name: "every optional member set", change: func(r *PrescriptionCreateRequest) {
			r.PrescriptionType, r.SCID, r.ScheduleNumber, r.DoctorNotes = "ELECTRONIC", "0123456789ABCDEFGH", "S4", strings.Repeat("n", 1000)
		}},
		{name: "item and quantity missing", change: func(r *PrescriptionCreateRequest) { r.ItemName, r.Quantity = "", "" },
			want: map[string]string{"item_name": "cannot be blank", "quantity": "cannot be blank"}},
		{name: "another type", change: func(r *PrescriptionCreateRequest) { r.PrescriptionType = "PAPER" },
			want: map[string]string{"prescription_type": "must be ELECTRONIC"}},
		{name: "a scid of lower case", change: func(r *PrescriptionCreateRequest) { r.SCID = "0123456789abcdefgh" },
			want: map[string]string{"scid": "must be 18 characters of 0-9 and A-Z"}},
		{name: "too long", change: func(r *PrescriptionCreateRequest) {
			r.ItemStrength, r.PBSCode, r.ReasonForPrescribing, r.ScheduleNumber = long, strings.Repeat("1", 21), strings.Repeat("r", 1001), "12345678901"
		}, want: map[string]string{
			"item_strength": "the length must be no more than 255", "pbs_code": "the length must be no more than 20",
			"reason_for_prescribing": "the length must be no more than 1000", "schedule_number": "the length must be no more than 10",
		}},
		{name: "delivery", change: func(r *PrescriptionCreateRequest) { r.Delivery.Method, r.Delivery.RecipientType = "FAX", "DOCTOR" },
			want: map[string]string{"delivery.method": "must be EMAIL or SMS", "delivery.recipient_type": "must be PHARMACY or PATIENT"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := valid()
			tt.change(&r)
			err := r.Validate()
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			got := map[string]string{}
			for _, f := range fieldErrors(err) {
				got[f.Field] = f.Message
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPrescriptionCreateRequestPrescription(t *testing.T) {
	t.Parallel()
	r := PrescriptionCreateRequest{
		PrescriptionType: "ELECTRONIC",
		PrescriptionItem: storage.PrescriptionItem{ItemName: "Amoxicillin", Quantity: "20", MySLConsent: true,
			CustomDrugDetails: storage.CustomDrugDetails{CustomProductID: "P-1"}},
		Delivery: DeliveryInput{Method: "EMAIL", RecipientType: "PHARMACY", Destination: "d@x.example",
			Pharmacy: &storage.Pharmacy{PharmacyID: "PH-1", Name: "Corner"}},
	}
	p := r.prescription("o", "u", "p", "https://rx.example/external")
	require.Equal(t, "o", p.OrgID)
	require.Equal(t, "u", p.UserID)
	require.Equal(t, "p", p.PatientID)
	require.Len(t, p.SCID, 18, "a scid is assigned")
	require.Equal(t, "https://rx.example/external/scripts/"+p.SCID, p.URL)
	require.Equal(t, r.PrescriptionItem, p.PrescriptionItem, "every member the prescriber chose is carried")
	require.Equal(t, storage.Delivery{Method: "EMAIL", RecipientType: "PHARMACY", Destination: "d@x.example",
		Pharmacy: &storage.Pharmacy{PharmacyID: "PH-1", Name: "Corner"}}, p.Delivery)
	r.SCID = "0123456789ABCDEFGH"
	require.Equal(t, r.SCID, r.prescription("o", "u", "p", "").SCID, "a supplied scid is kept")
}
