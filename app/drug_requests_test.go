package app

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

// drugRequiredMembers are the members spec 4.3 requires on create.
var drugRequiredMembers = []string{
	"item_generic_name", "item_strength", "item_form", "route_of_administration",
	"quantity", "poison_class", "max_repeats",
}

// drugLimits are the maximum lengths of spec 2.4, in characters.
var drugLimits = []struct {
	member string
	max    int
}{
	{"item_generic_name", 280},
	{"item_strength", 100},
	{"item_form", 50},
	{"route_of_administration", 50},
	{"poison_class", 2},
	{"item_trade_name", 280},
	{"brand_name", 100},
	{"custom_product_id", 50},
	{"description", 280},
	{"patient_instructions", 250},
	{"doctor_instructions", 50},
}

// validDrugMembers returns the members of a valid create body.
func validDrugMembers() map[string]any {
	return map[string]any{
		"item_generic_name":       "Amoxicillin",
		"item_strength":           "500 mg",
		"item_form":               "capsule",
		"route_of_administration": "oral",
		"quantity":                "20",
		"max_repeats":             "2",
		"poison_class":            "S4",
	}
}

// drugBody marshals members into a JSON object; a value of absentMember
// leaves the member out.
func drugBody(tb testing.TB, members map[string]any, overrides map[string]any) string {
	tb.Helper()
	m := map[string]any{}
	for k, v := range members {
		m[k] = v
	}
	for k, v := range overrides {
		if v == absentMember {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, err := json.Marshal(m)
	require.NoError(tb, err)
	return string(b)
}

// checkDrug runs body through decodeDrug, as the handlers do, and returns
// the input with the entries a client would see.
func checkDrug(tb testing.TB, body string, create bool) (*CustomDrugInput, []FieldError) {
	tb.Helper()
	in, fields, err := decodeDrug([]byte(body), create)
	require.NoError(tb, err, "body %s", body)
	for _, f := range fields {
		assert.NotEmpty(tb, f.Message, "field %s", f.Field)
		assert.Equal(tb, codeValidation, f.Code, "field %s", f.Field)
	}
	return in, fields
}

// entryFor returns the entry naming field, or nil.
func entryFor(fields []FieldError, field string) *FieldError {
	for i := range fields {
		if fields[i].Field == field {
			return &fields[i]
		}
	}
	return nil
}

// TestCustomDrugInputLengths checks every maximum length of spec 2.4 at the
// limit and one past it, counted in characters: multi-byte text whose byte
// length is past the limit is still accepted at the limit.
func TestCustomDrugInputLengths(t *testing.T) {
	t.Parallel()
	type tc struct {
		name    string
		member  string
		value   string
		create  bool
		wantErr bool
	}
	var tests []tc
	for _, l := range drugLimits {
		for _, char := range []string{"a", "é", "药", "💊"} {
			at, over := strings.Repeat(char, l.max), strings.Repeat(char, l.max+1)
			for _, create := range []bool{true, false} {
				op := "update"
				if create {
					op = "create"
				}
				tests = append(tests,
					tc{name: op + "/" + l.member + "/" + char + "/at limit", member: l.member, value: at, create: create},
					tc{name: op + "/" + l.member + "/" + char + "/limit+1", member: l.member, value: over, create: create, wantErr: true},
				)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var body string
			if tt.create {
				body = drugBody(t, validDrugMembers(), map[string]any{tt.member: tt.value})
			} else {
				body = drugBody(t, map[string]any{tt.member: tt.value}, nil)
			}
			in, fields := checkDrug(t, body, tt.create)
			if !tt.wantErr {
				require.Empty(t, fields, "%d characters, %d bytes", len([]rune(tt.value)), len(tt.value))
				var d storage.CustomDrug
				in.patch(&d)
				got, err := json.Marshal(d)
				require.NoError(t, err)
				var m map[string]any
				require.NoError(t, json.Unmarshal(got, &m))
				assert.Equal(t, tt.value, m[tt.member], "the value is stored whole")
				return
			}
			require.Len(t, fields, 1, "entries %+v", fields)
			assert.Equal(t, tt.member, fields[0].Field)
			assert.Contains(t, fields[0].Message, "length")
		})
	}
}

// TestCustomDrugInputRequired checks the members spec 4.3 requires on
// create: each missing one is named, null and blank count as missing, and
// an empty body names all seven.
func TestCustomDrugInputRequired(t *testing.T) {
	t.Parallel()
	type tc struct {
		name       string
		body       string
		create     bool
		wantFields []string
		wantMsg    string // the message of every entry, when set
	}
	tests := []tc{
		{name: "valid create", body: drugBody(t, validDrugMembers(), nil), create: true},
		{name: "empty body on create names every required member", body: `{}`, create: true,
			wantFields: slices.Sorted(slices.Values(drugRequiredMembers)), wantMsg: "is required"},
		{name: "empty body on update is fine", body: `{}`},
		{name: "optional members only on create", body: `{"brand_name":"Amoxil","description":"x"}`, create: true,
			wantFields: slices.Sorted(slices.Values(drugRequiredMembers)), wantMsg: "is required"},
	}
	for _, m := range drugRequiredMembers {
		tests = append(tests,
			tc{name: "create without " + m, body: drugBody(t, validDrugMembers(), map[string]any{m: absentMember}),
				create: true, wantFields: []string{m}, wantMsg: "is required"},
			tc{name: "create with null " + m, body: drugBody(t, validDrugMembers(), map[string]any{m: nil}),
				create: true, wantFields: []string{m}},
			tc{name: "create with empty " + m, body: drugBody(t, validDrugMembers(), map[string]any{m: ""}),
				create: true, wantFields: []string{m}, wantMsg: "is required"},
			tc{name: "create with blank " + m, body: drugBody(t, validDrugMembers(), map[string]any{m: "   "}),
				create: true, wantFields: []string{m}, wantMsg: "is required"},
			tc{name: "update with null " + m, body: drugBody(t, map[string]any{m: nil}, nil),
				wantFields: []string{m}, wantMsg: "must not be null"},
			// A required member may be changed on update but not cleared:
			// "" is as much a clearing as null.
			tc{name: "update with empty " + m, body: drugBody(t, map[string]any{m: ""}, nil), wantFields: []string{m}},
			tc{name: "update with blank " + m, body: drugBody(t, map[string]any{m: "  "}, nil), wantFields: []string{m}},
		)
	}
	two := drugBody(t, validDrugMembers(), map[string]any{"quantity": absentMember, "poison_class": absentMember})
	tests = append(tests, tc{name: "two missing are both named", body: two, create: true,
		wantFields: []string{"poison_class", "quantity"}, wantMsg: "is required"})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, fields := checkDrug(t, tt.body, tt.create)
			assert.Equal(t, nonNilStrings(tt.wantFields), nonNilStrings(entryFields(fields)), "body %s", tt.body)
			if tt.wantMsg != "" {
				for _, f := range fields {
					assert.Equal(t, tt.wantMsg, f.Message, "field %s", f.Field)
				}
			}
		})
	}
}

// TestCustomDrugInputCoercion checks quantity and max_repeats: a string or
// a number is accepted and kept as a string (a number with its JSON
// spelling); any other JSON type is an entry.
func TestCustomDrugInputCoercion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		raw     string // the member's JSON value
		want    string // the stored string, when valid
		wantMsg string // the entry's message, when invalid
	}{
		{name: "string", raw: `"5"`, want: "5"},
		{name: "string with text", raw: `"1 box"`, want: "1 box"},
		{name: "integer", raw: `5`, want: "5"},
		{name: "decimal", raw: `2.5`, want: "2.5"},
		{name: "decimal keeps trailing zero", raw: `2.50`, want: "2.50"},
		{name: "zero", raw: `0`, want: "0"},
		{name: "string zero", raw: `"0"`, want: "0"},
		{name: "exponent keeps its spelling", raw: `1e3`, want: "1e3"},
		{name: "big integer past float64 precision", raw: `99999999999999999999`, want: "99999999999999999999"},
		{name: "big integer past int64", raw: `18446744073709551616`, want: "18446744073709551616"},
		{name: "number with spaces around it", raw: ` 7 `, want: "7"},
		{name: "true", raw: `true`, wantMsg: "must be a string or a number"},
		{name: "false", raw: `false`, wantMsg: "must be a string or a number"},
		{name: "array", raw: `[5]`, wantMsg: "must be a string or a number"},
		{name: "empty array", raw: `[]`, wantMsg: "must be a string or a number"},
		{name: "object", raw: `{"value":5}`, wantMsg: "must be a string or a number"},
	}
	for _, member := range []string{"quantity", "max_repeats"} {
		for _, tt := range tests {
			for _, create := range []bool{true, false} {
				name := member + "/" + tt.name + "/update"
				if create {
					name = member + "/" + tt.name + "/create"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					var body string
					if create {
						members := validDrugMembers()
						delete(members, member)
						b := drugBody(t, members, nil)
						body = b[:len(b)-1] + `,"` + member + `":` + tt.raw + `}`
					} else {
						body = `{"` + member + `":` + tt.raw + `}`
					}
					in, fields := checkDrug(t, body, create)
					if tt.wantMsg != "" {
						require.Len(t, fields, 1, "body %s: %+v", body, fields)
						assert.Equal(t, member, fields[0].Field)
						assert.Equal(t, tt.wantMsg, fields[0].Message)
						return
					}
					require.Empty(t, fields, "body %s", body)
					var d storage.CustomDrug
					in.patch(&d)
					got := d.Quantity
					if member == "max_repeats" {
						got = d.MaxRepeats
					}
					assert.Equal(t, tt.want, got)
					out, err := json.Marshal(d)
					require.NoError(t, err)
					assert.Contains(t, string(out), `"`+member+`":"`+tt.want+`"`, "stored and answered as a string")
				})
			}
		}
	}
}

// TestCustomDrugInputCoercionNull checks that null quantity or max_repeats
// is refused with one entry naming the member, on create and on update.
func TestCustomDrugInputCoercionNull(t *testing.T) {
	t.Parallel()
	for _, member := range []string{"quantity", "max_repeats"} {
		tests := []struct {
			name   string
			body   string
			create bool
		}{
			{name: member + "/create", body: drugBody(t, validDrugMembers(), map[string]any{member: nil}), create: true},
			{name: member + "/update", body: `{"` + member + `":null}`},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				_, fields := checkDrug(t, tt.body, tt.create)
				require.Len(t, fields, 1, "%+v", fields)
				assert.Equal(t, member, fields[0].Field)
			})
		}
	}
}

// TestCustomDrugInputTypesAndUnknown checks wrong JSON types on the string
// members and members the drug does not have.
func TestCustomDrugInputTypesAndUnknown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       string
		create     bool
		wantFields []string
		wantMsg    map[string]string
	}{
		{name: "unknown member on update", body: `{"strength":"5 mg"}`,
			wantFields: []string{"strength"}, wantMsg: map[string]string{"strength": "is not a known field"}},
		{name: "unknown member on a valid create", body: drugBody(t, validDrugMembers(), map[string]any{"colour": "red"}), create: true,
			wantFields: []string{"colour"}, wantMsg: map[string]string{"colour": "is not a known field"}},
		{name: "custom_drug_id is assigned by the service", body: `{"custom_drug_id":"abc"}`,
			wantFields: []string{"custom_drug_id"}, wantMsg: map[string]string{"custom_drug_id": "is not a known field"}},
		{name: "number for a string member", body: `{"item_form":5}`,
			wantFields: []string{"item_form"}, wantMsg: map[string]string{"item_form": "must be a string"}},
		{name: "object for an optional member", body: `{"brand_name":{}}`,
			wantFields: []string{"brand_name"}, wantMsg: map[string]string{"brand_name": "must be a string"}},
		{name: "every problem at once", body: `{"item_generic_name":1,"poison_class":"S44","foo":true,"quantity":false}`, create: true,
			wantFields: []string{"foo", "item_form", "item_generic_name", "item_strength", "max_repeats", "poison_class", "quantity", "route_of_administration"}},
		{name: "update with no members", body: `{}`},
		{name: "update with whitespace around the object", body: " \n{ } \t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, fields := checkDrug(t, tt.body, tt.create)
			assert.Equal(t, nonNilStrings(tt.wantFields), nonNilStrings(entryFields(fields)))
			for field, msg := range tt.wantMsg {
				e := entryFor(fields, field)
				require.NotNil(t, e, "no entry for %s", field)
				assert.Equal(t, msg, e.Message)
			}
		})
	}
}

// TestCustomDrugInputNotAnObject checks bodies that are not JSON objects.
func TestCustomDrugInputNotAnObject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
	}{
		{name: "array", body: `[{}]`},
		{name: "string", body: `"drug"`},
		{name: "null", body: `null`},
		{name: "number", body: `5`},
		{name: "malformed", body: `{"item_form":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := decodeDrug([]byte(tt.body), true)
			var apiErr *Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, 400, apiErr.Status)
		})
	}
}

// TestCustomDrugInputPatch checks that an update changes only the members
// supplied and that null clears an optional member.
func TestCustomDrugInputPatch(t *testing.T) {
	t.Parallel()
	stored := func() storage.CustomDrug {
		return storage.CustomDrug{
			OrgID: "org", UserID: "user", ID: "drug",
			ItemGenericName: "Amoxicillin", ItemStrength: "500 mg", ItemForm: "capsule", RouteOfAdministration: "oral",
			Quantity: "20", MaxRepeats: "2", PoisonClass: "S4", ItemTradeName: "Amoxil", BrandName: "Amoxil",
			CustomProductID: "P-1", Description: "broad spectrum", PatientInstructions: "with food", DoctorInstructions: "check allergy",
		}
	}
	tests := []struct {
		name string
		body string
		want func(d *storage.CustomDrug)
	}{
		{name: "no members change nothing", body: `{}`, want: func(*storage.CustomDrug) {}},
		{name: "only supplied members change", body: `{"item_strength":"250 mg","quantity":10}`, want: func(d *storage.CustomDrug) {
			d.ItemStrength = "250 mg"
			d.Quantity = "10"
		}},
		{name: "every member", body: drugBody(t, map[string]any{
			"item_generic_name": "Cefalexin", "item_strength": "250 mg", "item_form": "tablet", "route_of_administration": "oral ",
			"quantity": 2.5, "max_repeats": "0", "poison_class": "S3", "item_trade_name": "Keflex", "brand_name": "Keflex",
			"custom_product_id": "药-1", "description": "é", "patient_instructions": "twice daily", "doctor_instructions": "none",
		}, nil), want: func(d *storage.CustomDrug) {
			*d = storage.CustomDrug{OrgID: "org", UserID: "user", ID: "drug",
				ItemGenericName: "Cefalexin", ItemStrength: "250 mg", ItemForm: "tablet", RouteOfAdministration: "oral ",
				Quantity: "2.5", MaxRepeats: "0", PoisonClass: "S3", ItemTradeName: "Keflex", BrandName: "Keflex",
				CustomProductID: "药-1", Description: "é", PatientInstructions: "twice daily", DoctorInstructions: "none"}
		}},
		{name: "null clears optional members", body: `{"item_trade_name":null,"brand_name":null,"custom_product_id":null,"description":null,"patient_instructions":null,"doctor_instructions":null}`,
			want: func(d *storage.CustomDrug) {
				d.ItemTradeName, d.BrandName, d.CustomProductID = "", "", ""
				d.Description, d.PatientInstructions, d.DoctorInstructions = "", "", ""
			}},
		{name: "null on one optional member leaves the others", body: `{"description":null}`, want: func(d *storage.CustomDrug) {
			d.Description = ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in, fields := checkDrug(t, tt.body, false)
			require.Empty(t, fields)
			got := stored()
			in.patch(&got)
			want := stored()
			tt.want(&want)
			assert.Equal(t, want, got)
		})
	}
}

// TestCustomDrugOmitsUnsetOptionals checks that optional members that are
// not set are left out of the drug as answered (spec 2.4), and required
// ones are always there.
func TestCustomDrugOmitsUnsetOptionals(t *testing.T) {
	t.Parallel()
	in, fields := checkDrug(t, drugBody(t, validDrugMembers(), map[string]any{"brand_name": "Amoxil"}), true)
	require.Empty(t, fields)
	d := storage.CustomDrug{ID: "id"}
	in.patch(&d)
	out, err := json.Marshal(d)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	want := append([]string{"custom_drug_id", "brand_name"}, drugRequiredMembers...)
	assert.ElementsMatch(t, want, slices.Collect(maps.Keys(m)))
}
