package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/config"
)

// TestPatientUpdateHardening covers hostile bodies on the patient update:
// each gets a 4xx, never a 500, and nothing is stored.
func TestPatientUpdateHardening(t *testing.T) {
	f := newPatientFuzzApp(t)
	manyUnknown := map[string]int{}
	for i := range 300 {
		manyUnknown[fmt.Sprintf("unknown_%03d", i)] = i
	}
	manyBody, err := json.Marshal(manyUnknown)
	require.NoError(t, err)
	tests := []struct {
		name       string
		body       []byte
		status     int
		maxEntries int
	}{
		{name: "NUL in a name", body: []byte(`{"given_name":"A\u0000B"}`), status: http.StatusUnprocessableEntity},
		{name: "invalid UTF-8", body: []byte("{\"title\":\"\xff\xfe\"}"), status: http.StatusBadRequest},
		{name: "very long medicare_irn", body: []byte(`{"medicare_irn":"` + strings.Repeat("1", 300) + `"}`), status: http.StatusUnprocessableEntity},
		{name: "300 unknown members", body: manyBody, status: http.StatusUnprocessableEntity, maxEntries: config.Defaults().HTTP.MaxValidationEntries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.reset(t)
			rec := f.put(tt.body)
			require.Equal(t, tt.status, rec.Code, rec.Body.String())
			var ans struct {
				Error struct {
					Validation []FieldError `json:"validation"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ans))
			if tt.maxEntries > 0 {
				assert.Len(t, ans.Error.Validation, tt.maxEntries)
			}
			p, err := f.app.store.GetPatient(f.ctx, f.org, f.user, f.patient)
			require.NoError(t, err)
			assert.Equal(t, f.baseline, p.PatientFields, "nothing stored")
		})
	}
}

// TestPatientVerificationsAreCapped checks that demographic verification
// requests do not grow the patient record without bound.
func TestPatientVerificationsAreCapped(t *testing.T) {
	f := newPatientFuzzApp(t)
	f.reset(t)
	for i := range maxVerifications + 5 {
		rec := f.put([]byte(fmt.Sprintf(`{"given_name":"Name%d"}`, i)))
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
	p, err := f.app.store.GetPatient(f.ctx, f.org, f.user, f.patient)
	require.NoError(t, err)
	require.Len(t, p.Verifications, maxVerifications)
	assert.Equal(t, []string{"given_name"}, p.Verifications[len(p.Verifications)-1].Fields)
}

// TestBulkCreateLargeItemsAreBatchedBySize sends 500 drugs with every member
// at its maximum length, of characters that JSON stores escaped (six bytes
// each): one transaction of them would exceed Badger's batch limit.
func TestBulkCreateLargeItemsAreBatchedBySize(t *testing.T) {
	d := newDrugApp(t)
	lt := func(n int) string { return strings.Repeat("<", n) }
	drug := map[string]any{
		"item_generic_name": lt(280), "item_strength": lt(100), "item_form": lt(50), "route_of_administration": lt(50),
		"quantity": "1", "max_repeats": "0", "poison_class": "S4", "item_trade_name": lt(280), "brand_name": lt(100),
		"custom_product_id": lt(50), "description": lt(280), "patient_instructions": lt(250), "doctor_instructions": lt(50),
	}
	items := make([]map[string]any, 500)
	for i := range items {
		items[i] = drug
	}
	// The request itself sends them raw; the store escapes them.
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(items))
	status, ans, raw := d.bulk(t, body.Bytes())
	require.Equal(t, http.StatusOK, status, raw)
	var res BulkResult
	require.NoError(t, json.Unmarshal(ans.Data, &res))
	assert.Equal(t, BulkResult{Total: 500, SuccessCount: 500, Failures: []BulkFailure{}}, res)
}

// TestPageLimitIsStrict checks that limit must be plain digits.
func TestPageLimitIsStrict(t *testing.T) {
	d := newDrugApp(t)
	tests := []struct {
		name   string
		query  string
		status int
	}{
		{name: "empty", query: "?limit=", status: http.StatusBadRequest},
		{name: "plus sign", query: "?limit=%2B5", status: http.StatusBadRequest},
		{name: "spaces", query: "?limit=%205", status: http.StatusBadRequest},
		{name: "plain", query: "?limit=5", status: http.StatusOK},
		{name: "absent", query: "", status: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, raw := d.do(t, d.request(http.MethodGet, "/users"+tt.query, d.adminTok, nil))
			assert.Equal(t, tt.status, status, raw)
		})
	}
}
