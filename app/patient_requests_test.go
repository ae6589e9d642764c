package app

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/invopop/validation"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// validateToday is the fixed "today" of the validation tests.
var validateToday = time.Date(2026, time.March, 11, 0, 0, 0, 0, time.UTC)

// checkPatient decodes body into a PatientInput with decodeObject,
// normalizes and validates it as the patient handlers do, and returns the
// input with the entries a client would see.
func checkPatient(tb testing.TB, body string, create bool) (*PatientInput, []FieldError) {
	tb.Helper()
	var in PatientInput
	fields, err := decodeObject([]byte(body), &in)
	require.NoError(tb, err, "body %s", body)
	in.normalize()
	if verr := in.validate(validateToday, create); verr != nil {
		var internal validation.InternalError
		require.False(tb, errors.As(verr, &internal), "validate returned an internal error: %v", verr)
		fields = append(fields, fieldErrors(verr)...)
	}
	return &in, dedupe(fields)
}

// entryFields returns the sorted field paths of entries.
func entryFields(fields []FieldError) []string {
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		out = append(out, f.Field)
	}
	slices.Sort(out)
	return out
}

// patientJSON marshals members into a JSON object body.
func patientJSON(tb testing.TB, members map[string]any) string {
	tb.Helper()
	b, err := json.Marshal(members)
	require.NoError(tb, err)
	return string(b)
}

// validAddress returns the members of a valid australian_address with
// overrides applied; an override of absentMember removes the member.
func validAddress(overrides map[string]any) map[string]any {
	a := map[string]any{
		"street_number": "12A",
		"street_name":   "Collins Street",
		"suburb":        "Melbourne",
		"state":         "VIC",
		"postcode":      "3000",
	}
	for k, v := range overrides {
		if v == absentMember {
			delete(a, k)
			continue
		}
		a[k] = v
	}
	return a
}

// absentMember marks a member to leave out of a body.
var absentMember = &struct{ absent bool }{true}

// assertMember checks one member value on its own (an update body, unless
// extra members are given): wantErr expects exactly one entry, named field.
func assertMember(t testing.TB, member string, value any, extra map[string]any, wantErr bool) {
	t.Helper()
	members := map[string]any{member: value}
	for k, v := range extra {
		members[k] = v
	}
	body := patientJSON(t, members)
	_, fields := checkPatient(t, body, false)
	if wantErr {
		assert.Equal(t, []string{member}, entryFields(fields), "body %s", body)
		for _, f := range fields {
			assert.NotEmpty(t, f.Message)
			assert.Equal(t, codeValidation, f.Code)
		}
		return
	}
	assert.Empty(t, fields, "body %s", body)
}

func TestPatientInputPhone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   any
		wantErr bool
	}{
		{name: "domestic mobile", value: "0412345678"},
		{name: "domestic landline", value: "0312345678"},
		{name: "domestic second digit 2", value: "0212345678"},
		{name: "domestic second digit 9", value: "0912345678"},
		{name: "international without plus", value: "61412345678"},
		{name: "international with plus", value: "+61412345678"},
		{name: "international landline with plus", value: "+61312345678"},
		{name: "second digit 1", value: "0123456789", wantErr: true},
		{name: "second digit 1 again", value: "0112345678", wantErr: true},
		{name: "11 digits", value: "04123456789", wantErr: true},
		{name: "9 digits", value: "041234567", wantErr: true},
		{name: "12 digits", value: "041234567890", wantErr: true},
		{name: "international 12 digits", value: "614123456789", wantErr: true},
		{name: "international national number starting 1", value: "+61123456789", wantErr: true},
		{name: "international with trunk 0", value: "+610412345678", wantErr: true},
		{name: "dashes", value: "04-1234-5678", wantErr: true},
		{name: "dash grouping", value: "0412-345-678", wantErr: true},
		{name: "other country", value: "+1234567890", wantErr: true},
		{name: "spaces", value: "0412 345 678", wantErr: true},
		{name: "surrounding spaces", value: " 0412345678 ", wantErr: true},
		{name: "empty", value: "", wantErr: true},
		{name: "letters", value: "04123456ab", wantErr: true},
		{name: "null", value: nil, wantErr: true},
		{name: "number", value: 412345678, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertMember(t, "phone", tt.value, nil, tt.wantErr)
		})
	}
}

func TestPatientInputDates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   any
		wantErr bool
	}{
		{name: "ordinary", value: "2023-02-28"},
		{name: "leap day", value: "2024-02-29"},
		{name: "leap day of a common year", value: "2023-02-29", wantErr: true},
		{name: "30 February", value: "2023-02-30", wantErr: true},
		{name: "month 13", value: "2023-13-01", wantErr: true},
		{name: "month 00", value: "2023-00-10", wantErr: true},
		{name: "day 32", value: "2023-01-32", wantErr: true},
		{name: "two-digit year", value: "23-01-01", wantErr: true},
		{name: "single-digit month and day", value: "2023-1-1", wantErr: true},
		{name: "day first", value: "01-02-2023", wantErr: true},
		{name: "slashes", value: "2023/01/01", wantErr: true},
		{name: "with time", value: "2023-01-01T00:00:00Z", wantErr: true},
		{name: "trailing space", value: "2023-01-01 ", wantErr: true},
		{name: "empty", value: "", wantErr: true},
		{name: "number", value: 20230101, wantErr: true},
	}
	for _, member := range []string{"date_of_birth", "medicare_valid_to"} {
		for _, tt := range tests {
			t.Run(member+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				assertMember(t, member, tt.value, nil, tt.wantErr)
			})
		}
	}
}

func TestPatientInputDateOfBirthNotInFuture(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		member  string
		value   any
		wantErr bool
	}{
		{name: "date of birth today", member: "date_of_birth", value: "2026-03-11"},
		{name: "date of birth yesterday", member: "date_of_birth", value: "2026-03-10"},
		{name: "date of birth tomorrow", member: "date_of_birth", value: "2026-03-12", wantErr: true},
		{name: "date of birth next year", member: "date_of_birth", value: "2027-01-01", wantErr: true},
		{name: "date of birth null", member: "date_of_birth", value: nil, wantErr: true},
		{name: "medicare valid to in the future", member: "medicare_valid_to", value: "2030-12-31"},
		{name: "medicare valid to null", member: "medicare_valid_to", value: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertMember(t, tt.member, tt.value, nil, tt.wantErr)
		})
	}
}

// TestAppToday checks the "today" date_of_birth is measured against: the
// date in UTC+14, the earliest time zone, so no Australian today is refused
// and nothing later is accepted.
func TestAppToday(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		now  time.Time
		want string
	}{
		{name: "before 10:00 UTC is the same UTC date", now: time.Date(2026, 3, 10, 9, 59, 59, 0, time.UTC), want: "2026-03-10"},
		{name: "from 10:00 UTC it is tomorrow in UTC+14", now: time.Date(2026, 3, 10, 10, 0, 0, 0, time.UTC), want: "2026-03-11"},
		{name: "zone of now does not matter", now: time.Date(2026, 3, 11, 0, 30, 0, 0, time.FixedZone("AEDT", 11*3600)), want: "2026-03-11"},
		{name: "end of year", now: time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC), want: "2027-01-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := &App{now: func() time.Time { return tt.now }}
			today := a.today()
			assert.Equal(t, tt.want, today.Format(dateLayout))

			var ok PatientInput
			_, err := decodeObject([]byte(`{"date_of_birth":"`+tt.want+`"}`), &ok)
			require.NoError(t, err)
			assert.NoError(t, ok.validate(today, false), "today is accepted")

			tomorrow := today.AddDate(0, 0, 1).Format(dateLayout)
			var bad PatientInput
			_, err = decodeObject([]byte(`{"date_of_birth":"`+tomorrow+`"}`), &bad)
			require.NoError(t, err)
			assert.Equal(t, []string{"date_of_birth"}, entryFields(fieldErrors(bad.validate(today, false))), "tomorrow in UTC+14 is refused")
		})
	}
}

func TestPatientInputSex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   any
		wantErr bool
	}{
		{name: "M", value: "M"},
		{name: "F", value: "F"},
		{name: "I", value: "I"},
		{name: "N", value: "N"},
		{name: "lower case", value: "m", wantErr: true},
		{name: "unknown letter", value: "X", wantErr: true},
		{name: "word", value: "Male", wantErr: true},
		{name: "empty", value: "", wantErr: true},
		{name: "null", value: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertMember(t, "sex", tt.value, nil, tt.wantErr)
		})
	}
}

func TestPatientInputIndigenousType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   any
		wantErr bool
	}{
		{name: "Aboriginal", value: "Aboriginal"},
		{name: "Torres Strait Islander", value: "Torres Strait Islander"},
		{name: "Both", value: "Both"},
		{name: "Neither", value: "Neither"},
		{name: "Prefer not to say", value: "Prefer not to say"},
		{name: "lower case", value: "aboriginal", wantErr: true},
		{name: "other value", value: "Other", wantErr: true},
		{name: "trailing space", value: "Both ", wantErr: true},
		{name: "empty", value: "", wantErr: true},
		{name: "null", value: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertMember(t, "indigenous_type", tt.value, nil, tt.wantErr)
		})
	}
}

func TestPatientInputDVA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		members    map[string]any
		wantFields []string
	}{
		{name: "white with file number", members: map[string]any{"dva_card_color": "W", "dva_file_number": "NX123456"}},
		{name: "orange with file number", members: map[string]any{"dva_card_color": "O", "dva_file_number": "NX123456"}},
		{name: "gold with file number", members: map[string]any{"dva_card_color": "G", "dva_file_number": "NX123456"}},
		{name: "file number alone", members: map[string]any{"dva_file_number": "NX123456"}},
		{name: "color null alone", members: map[string]any{"dva_card_color": nil}},
		{name: "both null", members: map[string]any{"dva_card_color": nil, "dva_file_number": nil}},
		{name: "color without file number", members: map[string]any{"dva_card_color": "G"}, wantFields: []string{"dva_file_number"}},
		{name: "color with null file number", members: map[string]any{"dva_card_color": "W", "dva_file_number": nil}, wantFields: []string{"dva_file_number"}},
		{name: "color with empty file number", members: map[string]any{"dva_card_color": "W", "dva_file_number": ""}, wantFields: []string{"dva_file_number"}},
		{name: "color with blank file number", members: map[string]any{"dva_card_color": "W", "dva_file_number": "   "}, wantFields: []string{"dva_file_number"}},
		{name: "lower case color", members: map[string]any{"dva_card_color": "w", "dva_file_number": "NX123456"}, wantFields: []string{"dva_card_color"}},
		{name: "unknown color", members: map[string]any{"dva_card_color": "B", "dva_file_number": "NX123456"}, wantFields: []string{"dva_card_color"}},
		{name: "empty color", members: map[string]any{"dva_card_color": "", "dva_file_number": "NX123456"}, wantFields: []string{"dva_card_color"}},
		{name: "unknown color without file number", members: map[string]any{"dva_card_color": "B"}, wantFields: []string{"dva_card_color", "dva_file_number"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, fields := checkPatient(t, patientJSON(t, tt.members), false)
			assert.Equal(t, nonNilStrings(tt.wantFields), entryFields(fields))
		})
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestPatientInputEmail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   any
		wantErr bool
	}{
		{name: "simple", value: "jane@example.com"},
		{name: "dots, plus and subdomain", value: "jane.citizen+rx@mail.example.com.au"},
		{name: "no at sign", value: "not-an-email", wantErr: true},
		{name: "no domain", value: "jane@", wantErr: true},
		{name: "no local part", value: "@example.com", wantErr: true},
		{name: "space", value: "jane citizen@example.com", wantErr: true},
		{name: "two at signs", value: "jane@@example.com", wantErr: true},
		{name: "longer than 255 characters", value: strings.Repeat("a", 250) + "@example.com", wantErr: true},
		{name: "empty", value: "", wantErr: true},
		{name: "null", value: nil, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertMember(t, "email", tt.value, nil, tt.wantErr)
		})
	}
}

func TestPatientInputIHINumber(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   any
		wantErr bool
	}{
		{name: "16 digits", value: "8003608166690503"},
		{name: "null", value: nil},
		{name: "15 digits", value: "800360816669050", wantErr: true},
		{name: "17 digits", value: "80036081666905031", wantErr: true},
		{name: "letter", value: "800360816669050A", wantErr: true},
		{name: "spaces", value: "8003 6081 6669 0503", wantErr: true},
		{name: "empty", value: "", wantErr: true},
		{name: "number", value: json.RawMessage(`8003608166690503`), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertMember(t, "ihi_number", tt.value, nil, tt.wantErr)
		})
	}
}

func TestPatientInputMedicareIRN(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   any
		wantErr bool
		want    *string // the stored value after normalize, when valid
	}{
		{name: "one digit", value: "1", want: new("1")},
		{name: "surrounding whitespace is trimmed", value: " 1 ", want: new("1")},
		{name: "tabs and newlines are trimmed", value: "\t2\n", want: new("2")},
		{name: "null", value: nil},
		{name: "letter", value: "1a", wantErr: true},
		{name: "inner space", value: "1 2", wantErr: true},
		{name: "sign", value: "-1", wantErr: true},
		{name: "number", value: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertMember(t, "medicare_irn", tt.value, nil, tt.wantErr)
			if tt.wantErr {
				return
			}
			in, _ := checkPatient(t, patientJSON(t, map[string]any{"medicare_irn": tt.value}), false)
			f := storage.PatientFields{MedicareIRN: new("9")}
			in.patch(&f)
			assert.Equal(t, tt.want, f.MedicareIRN)
		})
	}
}

// TestPatientInputFreeText checks the length bound of members the spec
// gives no format for, in characters rather than bytes.
func TestPatientInputFreeText(t *testing.T) {
	t.Parallel()
	members := []string{
		"family_name", "given_name", "title", "concession_pension_number", "entitlement_number",
		"racf_id", "medicare_card_number", "dva_file_number",
	}
	tests := []struct {
		name    string
		value   any
		wantErr bool
	}{
		{name: "one character", value: "é"},
		{name: "255 multi-byte characters", value: strings.Repeat("é", maxFreeText)},
		{name: "256 characters", value: strings.Repeat("a", maxFreeText+1), wantErr: true},
		{name: "number", value: 7, wantErr: true},
		{name: "boolean", value: true, wantErr: true},
		{name: "object", value: map[string]any{}, wantErr: true},
	}
	for _, member := range members {
		for _, tt := range tests {
			t.Run(member+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				assertMember(t, member, tt.value, nil, tt.wantErr)
			})
		}
	}
}

// TestPatientInputNames checks that a supplied name is not empty, on
// update as on create (the rule is RuneLength(1, ...)).
func TestPatientInputNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		member  string
		value   any
		wantErr bool
	}{
		{name: "family name", member: "family_name", value: "Citizen"},
		{name: "given name", member: "given_name", value: "Jane"},
		{name: "empty family name", member: "family_name", value: "", wantErr: true},
		{name: "empty given name", member: "given_name", value: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assertMember(t, tt.member, tt.value, nil, tt.wantErr)
		})
	}
}

func TestPatientInputBooleans(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		value   any
		wantErr bool
	}{
		{name: "true", value: true},
		{name: "false", value: false},
		{name: "string", value: "true", wantErr: true},
		{name: "number", value: 1, wantErr: true},
		{name: "null", value: nil, wantErr: true},
	}
	for _, member := range []string{"ctg_eligible", "is_inpatient"} {
		for _, tt := range tests {
			t.Run(member+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				assertMember(t, member, tt.value, nil, tt.wantErr)
			})
		}
	}
}

func TestPatientInputAustralianAddress(t *testing.T) {
	t.Parallel()
	const prefix = "australian_address."
	tests := []struct {
		name       string
		address    any
		wantFields []string
	}{
		{name: "valid", address: validAddress(nil)},
		{name: "missing street_number", address: validAddress(map[string]any{"street_number": absentMember}), wantFields: []string{prefix + "street_number"}},
		{name: "missing street_name", address: validAddress(map[string]any{"street_name": absentMember}), wantFields: []string{prefix + "street_name"}},
		{name: "missing suburb", address: validAddress(map[string]any{"suburb": absentMember}), wantFields: []string{prefix + "suburb"}},
		{name: "missing state", address: validAddress(map[string]any{"state": absentMember}), wantFields: []string{prefix + "state"}},
		{name: "missing postcode", address: validAddress(map[string]any{"postcode": absentMember}), wantFields: []string{prefix + "postcode"}},
		{name: "empty object", address: map[string]any{}, wantFields: []string{
			prefix + "postcode", prefix + "state", prefix + "street_name", prefix + "street_number", prefix + "suburb",
		}},
		{name: "empty street_number", address: validAddress(map[string]any{"street_number": ""}), wantFields: []string{prefix + "street_number"}},
		{name: "null member", address: validAddress(map[string]any{"suburb": nil}), wantFields: []string{prefix + "suburb"}},

		{name: "street_number 12 multi-byte characters", address: validAddress(map[string]any{"street_number": strings.Repeat("é", 12)})},
		{name: "street_number 13 characters", address: validAddress(map[string]any{"street_number": strings.Repeat("é", 13)}), wantFields: []string{prefix + "street_number"}},
		{name: "street_name 100 multi-byte characters", address: validAddress(map[string]any{"street_name": strings.Repeat("é", 100)})},
		{name: "street_name 101 characters", address: validAddress(map[string]any{"street_name": strings.Repeat("é", 101)}), wantFields: []string{prefix + "street_name"}},
		{name: "suburb 100 multi-byte characters", address: validAddress(map[string]any{"suburb": strings.Repeat("é", 100)})},
		{name: "suburb 101 characters", address: validAddress(map[string]any{"suburb": strings.Repeat("é", 101)}), wantFields: []string{prefix + "suburb"}},

		{name: "state VIC", address: validAddress(map[string]any{"state": "VIC"})},
		{name: "state NSW", address: validAddress(map[string]any{"state": "NSW"})},
		{name: "state QLD", address: validAddress(map[string]any{"state": "QLD"})},
		{name: "state WA", address: validAddress(map[string]any{"state": "WA"})},
		{name: "state SA", address: validAddress(map[string]any{"state": "SA"})},
		{name: "state TAS", address: validAddress(map[string]any{"state": "TAS"})},
		{name: "state ACT", address: validAddress(map[string]any{"state": "ACT"})},
		{name: "state NT", address: validAddress(map[string]any{"state": "NT"})},
		{name: "state lower case", address: validAddress(map[string]any{"state": "vic"}), wantFields: []string{prefix + "state"}},
		{name: "state name", address: validAddress(map[string]any{"state": "Victoria"}), wantFields: []string{prefix + "state"}},
		{name: "state other country", address: validAddress(map[string]any{"state": "CA"}), wantFields: []string{prefix + "state"}},

		{name: "postcode 4 digits leading zero", address: validAddress(map[string]any{"postcode": "0800"})},
		{name: "postcode 3 digits", address: validAddress(map[string]any{"postcode": "300"}), wantFields: []string{prefix + "postcode"}},
		{name: "postcode 5 digits", address: validAddress(map[string]any{"postcode": "30000"}), wantFields: []string{prefix + "postcode"}},
		{name: "postcode letter", address: validAddress(map[string]any{"postcode": "12a4"}), wantFields: []string{prefix + "postcode"}},
		{name: "postcode spaces", address: validAddress(map[string]any{"postcode": " 3000"}), wantFields: []string{prefix + "postcode"}},
		{name: "postcode number", address: validAddress(map[string]any{"postcode": 3000}), wantFields: []string{prefix + "postcode"}},

		{name: "unknown member", address: validAddress(map[string]any{"country": "AU"}), wantFields: []string{prefix + "country"}},
		{name: "array", address: []any{}, wantFields: []string{"australian_address"}},
		{name: "string", address: "12 Collins Street", wantFields: []string{"australian_address"}},
		{name: "null", address: nil, wantFields: []string{"australian_address"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, fields := checkPatient(t, patientJSON(t, map[string]any{"australian_address": tt.address}), false)
			assert.Equal(t, nonNilStrings(tt.wantFields), entryFields(fields))
		})
	}
}

// patientBodyTests are whole bodies with the entries they give.
// TestPatientInputBodies runs them; FuzzDecodeObject seeds from them.
var patientBodyTests = []struct {
	name       string
	body       string
	create     bool
	wantFields []string
}{
	{name: "empty update", body: `{}`},
	{name: "number for given_name", body: `{"given_name":42}`, wantFields: []string{"given_name"}},
	{name: "string for ctg_eligible", body: `{"ctg_eligible":"true"}`, wantFields: []string{"ctg_eligible"}},
	{name: "array for australian_address", body: `{"australian_address":["12","Collins Street"]}`, wantFields: []string{"australian_address"}},
	{name: "number for postcode", body: `{"australian_address":{"street_number":"1","street_name":"Collins Street","suburb":"Melbourne","state":"VIC","postcode":3000}}`, wantFields: []string{"australian_address.postcode"}},
	{name: "object for phone", body: `{"phone":{"number":"0412345678"}}`, wantFields: []string{"phone"}},
	{name: "array for sex", body: `{"sex":["M"]}`, wantFields: []string{"sex"}},
	{name: "huge number for given_name", body: `{"given_name":1e999}`, wantFields: []string{"given_name"}},
	{name: "unknown member", body: `{"foo":1}`, wantFields: []string{"foo"}},
	{name: "unknown member differs only in case", body: `{"Given_Name":"Jane"}`, wantFields: []string{"Given_Name"}},
	{name: "unknown and known members", body: `{"foo":1,"given_name":"Jane","bar":null}`, wantFields: []string{"bar", "foo"}},
	{name: "null given_name", body: `{"given_name":null}`, wantFields: []string{"given_name"}},
	{name: "null ihi_number", body: `{"ihi_number":null}`},
	{name: "every nullable member null", body: `{"ihi_number":null,"medicare_card_number":null,"medicare_irn":null,"medicare_valid_to":null,"dva_file_number":null,"dva_card_color":null}`},
	{name: "every non-nullable member null", body: `{"family_name":null,"given_name":null,"date_of_birth":null,"sex":null,"title":null,"phone":null,"email":null,"ctg_eligible":null,"indigenous_type":null,"concession_pension_number":null,"entitlement_number":null,"racf_id":null,"is_inpatient":null,"australian_address":null}`,
		wantFields: []string{"australian_address", "concession_pension_number", "ctg_eligible", "date_of_birth", "email", "entitlement_number", "family_name", "given_name", "indigenous_type", "is_inpatient", "phone", "racf_id", "sex", "title"}},
	{name: "five bad members", body: `{"phone":"04-1234-5678","sex":"X","ihi_number":"123","foo":true,"ctg_eligible":"yes"}`,
		wantFields: []string{"ctg_eligible", "foo", "ihi_number", "phone", "sex"}},
	{name: "bad members at both levels", body: `{"given_name":1,"australian_address":{"street_number":"1234567890123","state":"XX","postcode":"12a4","bar":1}}`,
		wantFields: []string{"australian_address.bar", "australian_address.postcode", "australian_address.state", "australian_address.street_name", "australian_address.street_number", "australian_address.suburb", "given_name"}},
	{name: "create needs the four demographic members", body: `{}`, create: true,
		wantFields: []string{"date_of_birth", "family_name", "given_name", "sex"}},
	{name: "create with blank names", body: `{"family_name":"  ","given_name":"","date_of_birth":"2000-01-01","sex":"F"}`, create: true,
		wantFields: []string{"family_name", "given_name"}},
	{name: "create with null demographics", body: `{"family_name":null,"given_name":null,"date_of_birth":null,"sex":null}`, create: true,
		wantFields: []string{"date_of_birth", "family_name", "given_name", "sex"}},
	{name: "create with wrong types reports the type once", body: `{"family_name":1,"given_name":"Jane","date_of_birth":"2000-01-01","sex":"F"}`, create: true,
		wantFields: []string{"family_name"}},
	{name: "create minimal", body: `{"family_name":"Citizen","given_name":"Jane","date_of_birth":"2000-01-01","sex":"F"}`, create: true},
	{name: "create full", create: true, body: `{"family_name":"Citizen","given_name":"Jane","date_of_birth":"1980-06-15","sex":"F","title":"Ms",` +
		`"phone":"+61412345678","email":"jane@example.com","ctg_eligible":true,"indigenous_type":"Neither","concession_pension_number":"123456789A",` +
		`"entitlement_number":"E123","ihi_number":"8003608166690503","racf_id":"R1","is_inpatient":false,"medicare_card_number":"2123456701",` +
		`"medicare_irn":" 1 ","medicare_valid_to":"2027-05-31","dva_file_number":"NX123456","dva_card_color":"G",` +
		`"australian_address":{"street_number":"1","street_name":"Collins Street","suburb":"Melbourne","state":"VIC","postcode":"3000"}}`},
	{name: "update needs no demographic member", body: `{"phone":"0412345678"}`},
}

func TestPatientInputBodies(t *testing.T) {
	t.Parallel()
	tests := patientBodyTests
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var fields []FieldError
			require.NotPanics(t, func() { _, fields = checkPatient(t, tt.body, tt.create) })
			assert.Equal(t, nonNilStrings(tt.wantFields), entryFields(fields))
			for _, f := range fields {
				assert.NotEmpty(t, f.Message, "field %s", f.Field)
				assert.Equal(t, codeValidation, f.Code, "field %s", f.Field)
			}
		})
	}
}

func TestPatientInputMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		create  bool
		field   string
		message string
	}{
		{name: "wrong type string", body: `{"given_name":42}`, field: "given_name", message: "must be a string"},
		{name: "wrong type boolean", body: `{"ctg_eligible":"true"}`, field: "ctg_eligible", message: "must be a boolean"},
		{name: "wrong type object", body: `{"australian_address":[]}`, field: "australian_address", message: "must be an object"},
		{name: "wrong nested type", body: `{"australian_address":{"postcode":3000}}`, field: "australian_address.postcode", message: "must be a string"},
		{name: "unknown member", body: `{"foo":1}`, field: "foo", message: "is not a known field"},
		{name: "null", body: `{"given_name":null}`, field: "given_name", message: "must not be null"},
		{name: "required", body: `{}`, create: true, field: "sex", message: "is required"},
		{name: "dva", body: `{"dva_card_color":"G"}`, field: "dva_file_number", message: "is required when dva_card_color is provided"},
		{name: "postcode", body: `{"australian_address":{"postcode":"12a4"}}`, field: "australian_address.postcode", message: "must be exactly 4 digits"},
		{name: "future date of birth", body: `{"date_of_birth":"2026-03-12"}`, field: "date_of_birth", message: "must not be in the future"},
		{name: "bad date", body: `{"date_of_birth":"2023-02-30"}`, field: "date_of_birth", message: "must be a real date in YYYY-MM-DD format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, fields := checkPatient(t, tt.body, tt.create)
			var got *FieldError
			for i := range fields {
				if fields[i].Field == tt.field {
					got = &fields[i]
				}
			}
			require.NotNil(t, got, "no entry for %s in %+v", tt.field, fields)
			assert.Equal(t, tt.message, got.Message)
		})
	}
}

func TestPatientInputPatch(t *testing.T) {
	t.Parallel()
	address := &storage.Address{StreetNumber: "1", StreetName: "Collins Street", Suburb: "Melbourne", State: "VIC", Postcode: "3000"}
	stored := func() storage.PatientFields {
		return storage.PatientFields{
			FamilyName:        new("Citizen"),
			GivenName:         new("Jane"),
			DateOfBirth:       new("1980-06-15"),
			Sex:               new("F"),
			Phone:             new("0412345678"),
			CTGEligible:       new(true),
			IHINumber:         new("8003608166690503"),
			MedicareIRN:       new("1"),
			DVAFileNumber:     new("NX1"),
			DVACardColor:      new("G"),
			AustralianAddress: address,
		}
	}
	tests := []struct {
		name string
		body string
		want func(f *storage.PatientFields)
	}{
		{name: "empty body changes nothing", body: `{}`, want: func(*storage.PatientFields) {}},
		{name: "only supplied members change", body: `{"given_name":"Janet","email":"janet@example.com"}`, want: func(f *storage.PatientFields) {
			f.GivenName = new("Janet")
			f.Email = new("janet@example.com")
		}},
		{name: "false is a value, not an omission", body: `{"ctg_eligible":false,"is_inpatient":false}`, want: func(f *storage.PatientFields) {
			f.CTGEligible = new(false)
			f.IsInpatient = new(false)
		}},
		{name: "null clears nullable members", body: `{"ihi_number":null,"medicare_irn":null,"dva_file_number":null,"dva_card_color":null}`, want: func(f *storage.PatientFields) {
			f.IHINumber = nil
			f.MedicareIRN = nil
			f.DVAFileNumber = nil
			f.DVACardColor = nil
		}},
		{name: "medicare_irn is stored trimmed", body: `{"medicare_irn":" 2 "}`, want: func(f *storage.PatientFields) {
			f.MedicareIRN = new("2")
		}},
		{name: "address is replaced whole", body: `{"australian_address":{"street_number":"9","street_name":"George Street","suburb":"Sydney","state":"NSW","postcode":"2000"}}`, want: func(f *storage.PatientFields) {
			f.AustralianAddress = &storage.Address{StreetNumber: "9", StreetName: "George Street", Suburb: "Sydney", State: "NSW", Postcode: "2000"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in, fields := checkPatient(t, tt.body, false)
			require.Empty(t, fields)
			got := stored()
			in.patch(&got)
			want := stored()
			tt.want(&want)
			assert.Equal(t, want, got)
		})
	}
}

// TestPatientInputPatchDoesNotAlias checks that patched fields do not share
// memory with the input, so a later change to one cannot reach the other.
func TestPatientInputPatchDoesNotAlias(t *testing.T) {
	t.Parallel()
	in, fields := checkPatient(t, `{"given_name":"Jane"}`, false)
	require.Empty(t, fields)
	var f storage.PatientFields
	in.patch(&f)
	in.GivenName.V = "Changed"
	require.NotNil(t, f.GivenName)
	assert.Equal(t, "Jane", *f.GivenName)
}

func TestDemographicChanges(t *testing.T) {
	t.Parallel()
	base := func() storage.PatientFields {
		return storage.PatientFields{
			FamilyName:  new("Citizen"),
			GivenName:   new("Jane"),
			DateOfBirth: new("1980-06-15"),
			Sex:         new("F"),
			Phone:       new("0412345678"),
		}
	}
	tests := []struct {
		name   string
		change func(f *storage.PatientFields)
		want   []string
	}{
		{name: "nothing changed", change: func(*storage.PatientFields) {}},
		{name: "same values in new pointers", change: func(f *storage.PatientFields) {
			f.FamilyName = new("Citizen")
			f.Sex = new("F")
		}},
		{name: "non-demographic member changed", change: func(f *storage.PatientFields) {
			f.Phone = new("0312345678")
			f.Email = new("jane@example.com")
		}},
		{name: "given name changed", change: func(f *storage.PatientFields) { f.GivenName = new("Janet") }, want: []string{"given_name"}},
		{name: "family name cleared", change: func(f *storage.PatientFields) { f.FamilyName = nil }, want: []string{"family_name"}},
		{name: "date of birth changed", change: func(f *storage.PatientFields) { f.DateOfBirth = new("1980-06-16") }, want: []string{"date_of_birth"}},
		{name: "sex changed", change: func(f *storage.PatientFields) { f.Sex = new("N") }, want: []string{"sex"}},
		{name: "case matters", change: func(f *storage.PatientFields) { f.GivenName = new("jane") }, want: []string{"given_name"}},
		{name: "all four changed, in spec order", change: func(f *storage.PatientFields) {
			f.Sex = new("M")
			f.DateOfBirth = new("1981-01-01")
			f.GivenName = new("John")
			f.FamilyName = new("Smith")
		}, want: []string{"family_name", "given_name", "date_of_birth", "sex"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before, after := base(), base()
			tt.change(&after)
			assert.Equal(t, tt.want, demographicChanges(&before, &after))
		})
	}

	t.Run("set from nothing", func(t *testing.T) {
		t.Parallel()
		before := storage.PatientFields{}
		after := base()
		assert.Equal(t, []string{"family_name", "given_name", "date_of_birth", "sex"}, demographicChanges(&before, &after))
	})
}
