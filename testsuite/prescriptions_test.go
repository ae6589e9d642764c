package testsuite_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// Members of a prescription list element (spec 2.5) by JSON type; error is
// checked apart, since only a prescription with status Error has it.
var (
	prescriptionStrings = []string{
		"prescription_type", "url", "scid", "status", "created_date", "item_name", "quantity",
		"number_of_repeats_authorised", "repeat_intervals", "pbs_code", "item_strength", "item_form",
		"route_administration", "pbsdva_authority_number", "phone_approval_authority_number", "schedule_number",
		"reason_for_prescribing", "patient_instructions", "doctor_notes", "pharmacy_name",
		"controlled_substance_reference", "send_to_pharmacy", "prescriber_script_number",
	}
	prescriptionBools = []string{
		"private_prescription", "emergency_supply", "brand_substitution_not_allowed", "regulation_24",
		"unusual_dose_flag", "unusual_qty_flag", "my_sl_consent", "unlisted_item_repat_authority",
	}
	prescriptionObjects = []string{"custom_drug_details", "prescriber", "delivery"}
)

// deprecationPattern is an RFC 9745 Deprecation value: "@" and a Unix time.
var deprecationPattern = regexp.MustCompile(`^@-?[0-9]+$`)

// fullPrescription is an operator create body setting every member of spec
// 2.5 the prescriber chooses, delivered to a pharmacy.
func fullPrescription(item string) map[string]any {
	return map[string]any{
		"prescription_type": "ELECTRONIC", "item_name": item, "quantity": "20", "number_of_repeats_authorised": "2",
		"repeat_intervals": "14", "pbs_code": "1889B", "item_strength": "500 mg", "item_form": "capsule",
		"route_administration": "oral", "pbsdva_authority_number": "A123", "phone_approval_authority_number": "P456",
		"schedule_number": "4", "private_prescription": true, "emergency_supply": true, "brand_substitution_not_allowed": true,
		"reason_for_prescribing": "Community-acquired pneumonia", "patient_instructions": "One capsule three times a day",
		"doctor_notes": "Review in a week", "pharmacy_name": "Collins Street Pharmacy", "regulation_24": true,
		"controlled_substance_reference": "CSR-1", "unusual_dose_flag": true, "unusual_qty_flag": true, "my_sl_consent": true,
		"send_to_pharmacy": "PH-1", "unlisted_item_repat_authority": true, "prescriber_script_number": "100200",
		"delivery": map[string]any{
			"method": "EMAIL", "recipient_type": "PHARMACY", "destination": "orders@pharmacy.example.test",
			"pharmacy": map[string]any{"pharmacy_id": "PH-1", "name": "Collins Street Pharmacy"},
		},
	}
}

// shortPrescription is an operator create body with few members, delivered
// to the patient by SMS.
func shortPrescription(item string) map[string]any {
	return map[string]any{
		"item_name": item, "quantity": "10",
		"delivery": map[string]any{"method": "SMS", "recipient_type": "PATIENT", "destination": "0412345678"},
	}
}

// newPrescription creates a prescription of a patient of user through the
// operator API and returns its scid.
func newPrescription(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, user, patientID string, body map[string]any) string {
	t.Helper()
	r := env.MustAdmin(t, http.MethodPost, adminPatientPath(tn, user, patientID)+"/prescriptions", body, http.StatusCreated)
	return r.String(t, "data.scid")
}

// newPrescriptions creates n short prescriptions and returns their scids in
// creation order.
func newPrescriptions(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, patientID string, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range n {
		out[i] = newPrescription(t, env, tn, testsuite.RolePrescriber, patientID, shortPrescription(fmt.Sprintf("Item %03d", i)))
	}
	return out
}

// prescriptionsPath is the partner path of a patient's prescriptions,
// with query parameters.
func prescriptionsPath(tn *testsuite.Tenant, user, patientID string, query url.Values) string {
	p := partnerPatientPath(tn, user, patientID) + "/prescriptions"
	if len(query) > 0 {
		p += "?" + query.Encode()
	}
	return p
}

// pageOf is the pagination object of spec 2.1.
type pageOf struct {
	Count   int     `json:"count"`
	HasNext bool    `json:"hasNext"`
	Limit   int     `json:"limit"`
	Offset  int     `json:"offset"`
	LastKey *string `json:"lastKey"`
}

// prescriptionPage is one answer of the prescription list.
type prescriptionPage struct {
	Items []map[string]any
	Page  pageOf
}

// scids are the page's scids in order.
func (p prescriptionPage) scids() []string {
	out := make([]string, len(p.Items))
	for i, item := range p.Items {
		out[i], _ = item["scid"].(string)
	}
	return out
}

// listPrescriptions reads one page, requiring 200, a well-formed envelope
// and pagination with all five members (lastKey present, perhaps null).
func listPrescriptions(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, token, path string) (prescriptionPage, *testsuite.Response) {
	t.Helper()
	r := env.Do(t, testsuite.Request{URL: path, Token: token, Headers: tn.Headers()})
	require.Equal(t, http.StatusOK, r.Status, "GET %s: %s", path, r.Body)
	require.True(t, env.CheckEnvelope(t, r), "GET %s: malformed envelope", path)
	pg, ok := r.Get("pagination")
	require.True(t, ok, "no pagination in %s", r.Body)
	members, _ := pg.(map[string]any)
	for _, m := range []string{"count", "hasNext", "limit", "offset", "lastKey"} {
		require.Contains(t, members, m, "pagination lacks %s", m)
	}
	var out prescriptionPage
	var page struct {
		Pagination pageOf `json:"pagination"`
	}
	asJSONInto(t, r.Envelope, &page)
	out.Page = page.Pagination
	v, ok := r.Get("data.prescriptions")
	require.True(t, ok, "no data.prescriptions in %s", r.Body)
	list, ok := v.([]any)
	require.True(t, ok, "data.prescriptions is %T, not an array", v)
	for i, item := range list {
		m, ok := item.(map[string]any)
		require.True(t, ok, "prescriptions[%d] is %T", i, item)
		out.Items = append(out.Items, m)
	}
	assert.Equal(t, len(out.Items), out.Page.Count, "pagination.count is the number of items on the page")
	assert.Equal(t, out.Page.HasNext, out.Page.LastKey != nil, "lastKey is null exactly when there is no next page")
	return out, r
}

// asJSONInto re-decodes v into dst.
func asJSONInto(t testing.TB, v, dst any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, dst))
}

// walk reads every page of a list with limit, calling between (when set)
// after each page but the last, and returns the pages.
func walk(t testing.TB, env *testsuite.Env, tn *testsuite.Tenant, token, patientID string, limit int, between func(page int)) []prescriptionPage {
	t.Helper()
	var pages []prescriptionPage
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	for {
		p, _ := listPrescriptions(t, env, tn, token, prescriptionsPath(tn, testsuite.RolePrescriber, patientID, q))
		pages = append(pages, p)
		if !p.Page.HasNext {
			return pages
		}
		require.Less(t, len(pages), 1000, "the walk does not end")
		require.NotNil(t, p.Page.LastKey)
		q.Set("lastKey", *p.Page.LastKey)
		if between != nil {
			between(len(pages) - 1)
		}
	}
}

// reversed returns s newest first.
func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// flipChar replaces the character at i with another of the base64url
// alphabet.
func flipChar(s string, i int) string {
	c := byte('A')
	if s[i] == 'A' {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

// TestPrescriptionListShape checks the list's data (spec 4.6, 2.5): the
// patient, the deprecated top-level prescriber announced by a Deprecation
// header, every member of each prescription, error only on status Error,
// custom_drug_details, prescriber and delivery, newest first.
func TestPrescriptionListShape(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	prescriberID := tn.Users[testsuite.RolePrescriber]
	token := tn.Token(t, testsuite.RolePrescriber)
	patient := storedPatient(t, env, tn, testsuite.RolePrescriber, tn.PatientID)

	custom := merge(shortPrescription("Compounded cream"), map[string]any{"custom_drug_details": map[string]any{"custom_product_id": "CP-0001"}})
	bodies := []map[string]any{fullPrescription("Amoxicillin 500 mg capsule"), custom, shortPrescription("Paracetamol 500 mg"),
		fullPrescription("Cefalexin 500 mg capsule")}
	var scids []string
	for _, b := range bodies {
		scids = append(scids, newPrescription(t, env, tn, testsuite.RolePrescriber, tn.PatientID, b))
	}
	body := map[string]map[string]any{}
	for i, s := range scids {
		body[s] = bodies[i]
	}
	ceased, erred := scids[2], scids[3]
	env.MustAdmin(t, http.MethodPatch, tn.PatientPath()+"/prescriptions/"+ceased, map[string]any{"status": "Ceased"}, http.StatusOK)
	env.MustAdmin(t, http.MethodPatch, tn.PatientPath()+"/prescriptions/"+erred,
		map[string]any{"status": "Error", "error": map[string]any{"description": "Dispensing system rejected the token"}}, http.StatusOK)
	status := map[string]string{scids[0]: "Active", scids[1]: "Active", ceased: "Ceased", erred: "Error"}

	page, r := listPrescriptions(t, env, tn, token, prescriptionsPath(tn, testsuite.RolePrescriber, tn.PatientID, nil))
	assert.Regexp(t, deprecationPattern, r.Header.Get("Deprecation"), "the Deprecation header announces the deprecated prescriber")
	assert.Equal(t, pageOf{Count: 4, Limit: 20}, page.Page)

	t.Run("patient", func(t *testing.T) {
		assert.Equal(t, "Charlotte", r.String(t, "data.patient.given_name"))
		assert.Equal(t, "Wilson", r.String(t, "data.patient.family_name"))
		assert.Equal(t, "F", r.String(t, "data.patient.sex"))
		assert.Equal(t, tn.PatientID, r.String(t, "data.patient.patient_id"))
		assert.Equal(t, patient["partner_patient_id"], r.String(t, "data.patient.partner_patient_id"))
		dob, err := time.Parse(time.RFC3339Nano, r.String(t, "data.patient.date_of_birth"))
		require.NoError(t, err, "date_of_birth is a date-time string")
		assert.Equal(t, "1984-07-19", dob.UTC().Format("2006-01-02"))
	})
	t.Run("deprecated prescriber", func(t *testing.T) {
		assert.Equal(t, "Alex", r.String(t, "data.prescriber.given_name"))
		assert.Equal(t, "Nguyen", r.String(t, "data.prescriber.family_name"))
		assert.Equal(t, prescriberID, r.String(t, "data.prescriber.user_id"))
	})
	t.Run("newest first", func(t *testing.T) {
		assert.Equal(t, reversed(scids), page.scids())
		var last time.Time
		for i, item := range page.Items {
			created, err := time.Parse(time.RFC3339Nano, fmt.Sprint(item["created_date"]))
			require.NoError(t, err, "created_date %v", item["created_date"])
			if i > 0 {
				assert.False(t, created.After(last), "created_date rises at %d", i)
			}
			last = created
		}
	})
	for _, item := range page.Items {
		scid, _ := item["scid"].(string)
		t.Run("item "+scid, func(t *testing.T) {
			for _, m := range prescriptionStrings {
				assert.IsType(t, "", item[m], "%s is a string", m)
			}
			for _, m := range prescriptionBools {
				assert.IsType(t, true, item[m], "%s is a boolean", m)
			}
			for _, m := range prescriptionObjects {
				assert.IsType(t, map[string]any{}, item[m], "%s is an object", m)
			}
			for k, v := range body[scid] {
				assert.Equal(t, asJSON(t, v), item[k], "member %s is what was prescribed", k)
			}
			assert.Equal(t, status[scid], item["status"])
			assert.Equal(t, "ELECTRONIC", item["prescription_type"])
			assert.Contains(t, item["url"], scid)
			if scid == erred {
				assert.Equal(t, map[string]any{"description": "Dispensing system rejected the token"}, item["error"])
			} else {
				assert.NotContains(t, item, "error", "only a prescription with status Error has an error member")
			}
			if _, isCustom := body[scid]["custom_drug_details"]; !isCustom {
				assert.Equal(t, map[string]any{}, item["custom_drug_details"], "custom_drug_details is {} for a normal item")
			}
			assert.Equal(t, map[string]any{"title": "Dr", "given_name": "Alex", "family_name": "Nguyen", "user_id": prescriberID},
				item["prescriber"])
			delivery, _ := item["delivery"].(map[string]any)
			for _, m := range []string{"method", "recipient_type", "destination"} {
				assert.IsType(t, "", delivery[m], "delivery.%s is a string", m)
			}
			if delivery["recipient_type"] == "PHARMACY" {
				assert.Equal(t, map[string]any{"pharmacy_id": "PH-1", "name": "Collins Street Pharmacy"}, delivery["pharmacy"])
			} else {
				assert.NotContains(t, delivery, "pharmacy", "pharmacy is present for pharmacy recipients only")
			}
		})
	}
}

// TestPrescriptionListPatientAndPrescriber checks whose names the list
// shows: the patient's current values after an update, the patient's user
// as the top-level prescriber even when a manager reads it, and an empty
// list for a patient without prescriptions.
func TestPrescriptionListPatientAndPrescriber(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	prescriberID := tn.Users[testsuite.RolePrescriber]
	token := tn.Token(t, testsuite.RolePrescriber)

	t.Run("empty list", func(t *testing.T) {
		id := newPatient(t, env, tn, testsuite.RolePrescriber, nil)
		page, r := listPrescriptions(t, env, tn, token, prescriptionsPath(tn, testsuite.RolePrescriber, id, nil))
		assert.Empty(t, page.Items)
		assert.Equal(t, pageOf{Limit: 20}, page.Page)
		assert.Contains(t, string(r.Body), `"prescriptions":[]`, "an empty list is [], not null")
		assert.Equal(t, "Jane", r.String(t, "data.patient.given_name"))
		assert.Equal(t, "", r.String(t, "data.patient.partner_patient_id"))
	})
	t.Run("read by a manager", func(t *testing.T) {
		newPrescription(t, env, tn, testsuite.RolePrescriber, tn.PatientID, shortPrescription("Ibuprofen 200 mg"))
		for _, role := range []string{testsuite.RoleOwner, testsuite.RoleAdmin} {
			_, r := listPrescriptions(t, env, tn, tn.Token(t, role), prescriptionsPath(tn, testsuite.RolePrescriber, tn.PatientID, nil))
			assert.Equal(t, prescriberID, r.String(t, "data.prescriber.user_id"), "the top-level prescriber is the patient's user")
			assert.Equal(t, prescriberID, r.String(t, "data.prescriptions.0.prescriber.user_id"))
		}
	})
	t.Run("after a patient update", func(t *testing.T) {
		id := newPatient(t, env, tn, testsuite.RolePrescriber, nil)
		path := prescriptionsPath(tn, testsuite.RolePrescriber, id, nil)
		listPrescriptions(t, env, tn, token, path) // a first read, which the server may remember
		r := env.Do(t, testsuite.Request{Method: http.MethodPut, URL: partnerPatientPath(tn, testsuite.RolePrescriber, id), Token: token,
			Headers: tn.Headers(), Body: map[string]any{"given_name": "Janet", "date_of_birth": "1981-02-03", "sex": "N"}})
		require.Equal(t, http.StatusOK, r.Status, "body: %s", r.Body)
		_, r = listPrescriptions(t, env, tn, token, path)
		assert.Equal(t, "Janet", r.String(t, "data.patient.given_name"))
		assert.Equal(t, "N", r.String(t, "data.patient.sex"))
		assert.True(t, strings.HasPrefix(r.String(t, "data.patient.date_of_birth"), "1981-02-03T"), "date_of_birth %s", r.String(t, "data.patient.date_of_birth"))
	})
}

// TestPrescriptionListPages checks limit (spec 4.6, 8: default 20, 1..50,
// anything else 400 on limit), pagination, walking every page, and cursors
// that are tampered with, garbage or from another list (400 on lastKey).
func TestPrescriptionListPages(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)
	id := newPatient(t, env, tn, testsuite.RolePrescriber, nil)
	created := newPrescriptions(t, env, tn, id, 63)
	newest := reversed(created)
	otherID := newPatient(t, env, tn, testsuite.RolePrescriber, nil)
	newPrescriptions(t, env, tn, otherID, 3)
	path := func(q url.Values) string { return prescriptionsPath(tn, testsuite.RolePrescriber, id, q) }

	t.Run("limit", func(t *testing.T) {
		tests := []struct {
			name       string
			limit      []string // nil: no limit parameter
			status     int
			wantPage   pageOf // LastKey ignored
			wantOffset int
		}{
			{name: "default 20", status: http.StatusOK, wantPage: pageOf{Count: 20, HasNext: true, Limit: 20}},
			{name: "1", limit: []string{"1"}, status: http.StatusOK, wantPage: pageOf{Count: 1, HasNext: true, Limit: 1}},
			{name: "50", limit: []string{"50"}, status: http.StatusOK, wantPage: pageOf{Count: 50, HasNext: true, Limit: 50}},
			{name: "0", limit: []string{"0"}, status: http.StatusBadRequest},
			{name: "51", limit: []string{"51"}, status: http.StatusBadRequest},
			{name: "-1", limit: []string{"-1"}, status: http.StatusBadRequest},
			{name: "abc", limit: []string{"abc"}, status: http.StatusBadRequest},
			{name: "1.5", limit: []string{"1.5"}, status: http.StatusBadRequest},
			{name: "1e1", limit: []string{"1e1"}, status: http.StatusBadRequest},
			{name: "too large for an integer", limit: []string{"99999999999999999999"}, status: http.StatusBadRequest},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				var q url.Values
				if tt.limit != nil {
					q = url.Values{"limit": tt.limit}
				}
				if tt.status != http.StatusOK {
					testsuite.RunScenario(t, env, testsuite.Scenario{Path: path(q), Token: token, Headers: tn.Headers(),
						Status: tt.status, Slug: "validation-error", Check: fieldsExactly("limit")})
					return
				}
				page, _ := listPrescriptions(t, env, tn, token, path(q))
				page.Page.LastKey = nil
				assert.Equal(t, tt.wantPage, page.Page)
				assert.Equal(t, newest[:tt.wantPage.Count], page.scids())
			})
		}
	})

	t.Run("walk", func(t *testing.T) {
		tests := []struct {
			name  string
			limit int
		}{
			{name: "limit 7, nine full pages", limit: 7},
			{name: "limit 10, a short last page", limit: 10},
			{name: "limit 50", limit: 50},
			{name: "limit 21, the last page exactly full", limit: 21},
			{name: "limit 1", limit: 1},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				pages := walk(t, env, tn, token, id, tt.limit, nil)
				var seen []string
				for i, p := range pages {
					last := i == len(pages)-1
					assert.Equal(t, tt.limit, p.Page.Limit, "page %d limit", i)
					assert.Equal(t, len(seen), p.Page.Offset, "page %d offset is the number of items before it", i)
					assert.Equal(t, !last, p.Page.HasNext, "page %d hasNext", i)
					if last {
						assert.Nil(t, p.Page.LastKey, "lastKey is null on the last page")
					} else {
						assert.Equal(t, tt.limit, p.Page.Count, "page %d is full", i)
					}
					seen = append(seen, p.scids()...)
				}
				assert.Len(t, pages, (len(created)+tt.limit-1)/tt.limit)
				assert.Equal(t, newest, seen, "every prescription exactly once, newest first")
			})
		}
	})

	t.Run("cursor", func(t *testing.T) {
		first, _ := listPrescriptions(t, env, tn, token, path(url.Values{"limit": {"7"}}))
		require.NotNil(t, first.Page.LastKey)
		key := *first.Page.LastKey
		otherFirst, _ := listPrescriptions(t, env, tn, token, prescriptionsPath(tn, testsuite.RolePrescriber, otherID, url.Values{"limit": {"1"}}))
		require.NotNil(t, otherFirst.Page.LastKey)
		otherKey := *otherFirst.Page.LastKey

		t.Run("a cursor continues with another limit", func(t *testing.T) {
			page, _ := listPrescriptions(t, env, tn, token, path(url.Values{"limit": {"3"}, "lastKey": {key}}))
			assert.Equal(t, 7, page.Page.Offset)
			assert.Equal(t, newest[7:10], page.scids())
		})
		tests := []struct {
			name    string
			lastKey string
			patient string
		}{
			{name: "first character flipped", lastKey: flipChar(key, 0)},
			{name: "middle character flipped", lastKey: flipChar(key, len(key)/2)},
			{name: "last character flipped", lastKey: flipChar(key, len(key)-1)},
			{name: "truncated", lastKey: key[:len(key)-1]},
			{name: "extended", lastKey: key + "A"},
			{name: "padded", lastKey: key + "="},
			{name: "standard base64 alphabet", lastKey: strings.NewReplacer("-", "+", "_", "/").Replace(key) + "+/"},
			{name: "garbage", lastKey: "garbage"},
			{name: "not base64", lastKey: "%%%***"},
			{name: "long garbage", lastKey: strings.Repeat("Zm9v", 64)},
			{name: "another patient's cursor", lastKey: otherKey},
			{name: "this list's cursor on another patient", lastKey: key, patient: otherID},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				patient := id
				if tt.patient != "" {
					patient = tt.patient
				}
				testsuite.RunScenario(t, env, testsuite.Scenario{
					Path:  prescriptionsPath(tn, testsuite.RolePrescriber, patient, url.Values{"limit": {"7"}, "lastKey": {tt.lastKey}}),
					Token: token, Headers: tn.Headers(), Status: http.StatusBadRequest, Slug: "validation-error",
					Check: fieldsExactly("lastKey"),
				})
			})
		}
	})
}

// TestPrescriptionListWalkWhileCreating checks that prescriptions created
// during a walk neither skip nor repeat any that existed when it began.
func TestPrescriptionListWalkWhileCreating(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn := env.NewTenant(t)
	token := tn.Token(t, testsuite.RolePrescriber)
	tests := []struct {
		name    string
		limit   int
		initial int
		during  int // created after each page
	}{
		{name: "limit 4, two new per page", limit: 4, initial: 26, during: 2},
		{name: "limit 7, seven new per page", limit: 7, initial: 21, during: 7},
		{name: "limit 1, one new per page", limit: 1, initial: 8, during: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := newPatient(t, env, tn, testsuite.RolePrescriber, nil)
			initial := newPrescriptions(t, env, tn, id, tt.initial)
			n := 0
			pages := walk(t, env, tn, token, id, tt.limit, func(int) {
				for range tt.during {
					newPrescription(t, env, tn, testsuite.RolePrescriber, id, shortPrescription(fmt.Sprintf("During %d", n)))
					n++
				}
			})
			var seen []string
			for i, p := range pages {
				assert.Equal(t, len(seen), p.Page.Offset, "page %d offset", i)
				seen = append(seen, p.scids()...)
			}
			count := map[string]int{}
			for _, s := range seen {
				count[s]++
			}
			for s, c := range count {
				assert.Equal(t, 1, c, "scid %s seen %d times", s, c)
			}
			for _, s := range initial {
				assert.Equal(t, 1, count[s], "scid %s, which existed when the walk began, seen %d times", s, count[s])
			}
			assert.Positive(t, n, "prescriptions were created during the walk")
		})
	}
}

// TestPrescriptionListRefused checks the list's refusals (spec 4.6, 5, 7):
// 401, 403 and 404 patient-not-found, none of them showing the patient.
func TestPrescriptionListRefused(t *testing.T) {
	t.Parallel()
	env := testsuite.Start(t)
	tn, other := env.NewTenant(t), env.NewTenant(t)
	newPrescription(t, env, tn, testsuite.RolePrescriber, tn.PatientID, shortPrescription("Amoxicillin 500 mg"))
	ownersPatient := newPatient(t, env, tn, testsuite.RoleOwner, nil)
	prescriber := tn.Token(t, testsuite.RolePrescriber)
	noScope := tn.Token(t, testsuite.RolePrescriber, scopesExcept("read:patient_prescription")...)
	admin := tn.Token(t, testsuite.RoleAdmin)
	owner := tn.Token(t, testsuite.RoleOwner)
	otherToken := other.Token(t, testsuite.RolePrescriber)
	path := prescriptionsPath(tn, testsuite.RolePrescriber, tn.PatientID, nil)
	hidden := []string{"Charlotte", "Wilson", "Amoxicillin", `"prescriptions"`}

	tests := []testsuite.Scenario{
		{Name: "200 the prescriber", Status: http.StatusOK, Contains: []string{"Amoxicillin"}},
		{Name: "401 no token", Token: "-", Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "401 token that is not a JWT", Token: "not-a-token", Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "401 wrong organization secret", Headers: map[string]string{testsuite.HeaderOrganizationSecret: "wrong"},
			Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "401 no organization secret", Headers: map[string]string{}, Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "401 another tenant's token and secret", Token: otherToken, Headers: other.Headers(), Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "401 another tenant's token with this organization's secret", Token: otherToken, Status: http.StatusUnauthorized, Slug: slugAuth},
		{Name: "403 token without read:patient_prescription", Token: noScope, Status: http.StatusForbidden, Slug: "insufficient-scope",
			Check: detailNames("read:patient_prescription")},
		{Name: "403 prescriber token on another user's patient", Path: prescriptionsPath(tn, testsuite.RoleOwner, ownersPatient, nil),
			Status: http.StatusForbidden},
		{Name: "403 member token", Token: tn.Token(t, testsuite.RoleMember), Status: http.StatusForbidden},
		{Name: "404 unknown patient", Path: prescriptionsPath(tn, testsuite.RolePrescriber, uuid.NewString(), nil),
			Status: http.StatusNotFound, Slug: "patient-not-found"},
		{Name: "404 patient id that is not a uuid", Path: prescriptionsPath(tn, testsuite.RolePrescriber, "not-a-uuid", nil),
			Status: http.StatusNotFound, Slug: "patient-not-found"},
		{Name: "404 another user's patient through an admin token", Token: admin,
			Path: prescriptionsPath(tn, testsuite.RoleAdmin, tn.PatientID, nil), Status: http.StatusNotFound, Slug: "patient-not-found"},
		{Name: "404 another user's patient under the prescriber's own path",
			Path: prescriptionsPath(tn, testsuite.RolePrescriber, ownersPatient, nil), Status: http.StatusNotFound, Slug: "patient-not-found"},
		{Name: "404 another organization's patient through an owner token", Token: owner,
			Path:   prescriptionsPath(tn, other.Users[testsuite.RolePrescriber], other.PatientID, nil),
			Status: http.StatusNotFound, Slug: "patient-not-found"},
	}
	// Defaults: the path above, the prescriber's token (Token "-" sends
	// none) and this organization's secret.
	for i := range tests {
		sc := &tests[i]
		if sc.Path == "" {
			sc.Path = path
		}
		switch sc.Token {
		case "":
			sc.Token = prescriber
		case "-":
			sc.Token = ""
		}
		if sc.Headers == nil {
			sc.Headers = tn.Headers()
		}
		if sc.Status != http.StatusOK {
			sc.NotContains = hidden
		}
	}
	runParallel(t, env, tests)
}
