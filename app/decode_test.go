package app

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/invopop/validation"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Test-local destinations for decodeObject.
type (
	decodeLeaf struct {
		N    int      `json:"n"`
		S    string   `json:"s"`
		List []string `json:"list"`
	}
	decodeMiddle struct {
		Leaf  decodeLeaf  `json:"leaf"`
		PLeaf *decodeLeaf `json:"pleaf"`
		Flag  bool        `json:"flag"`
	}
	decodeRoot struct {
		Middle  decodeMiddle `json:"middle"`
		Name    string       `json:"name"`
		Ratio   float64      `json:"ratio"`
		Skipped string       `json:"-"`
		Untaged string
	}

	// DecodeBase is embedded by decodeEmbedding, as PatientInput is by
	// AdminPatientCreateRequest.
	DecodeBase struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	decodeEmbedding struct {
		Extra string `json:"extra"`
		DecodeBase
	}

	// decodeShadowing has an outer member with the name of an embedded one:
	// encoding/json gives the outer member precedence.
	decodeShadowing struct {
		ID string `json:"id"`
		DecodeBase
	}
	decodeBaseUnexported struct {
		Note string `json:"note"`
	}
	// decodeUnexportedEmbed embeds an unexported struct type whose
	// exported members encoding/json still promotes.
	decodeUnexportedEmbed struct {
		decodeBaseUnexported
	}
	// decodePointerEmbed embeds a struct by pointer, which encoding/json
	// also flattens.
	decodePointerEmbed struct {
		*DecodeBase
	}
)

// notObjectTests are bodies decodeObject refuses as a whole.
var notObjectTests = []struct {
	name      string
	body      string
	malformed bool // errMalformedJSON rather than a bad request
}{
	{name: "empty", body: "", malformed: true},
	{name: "whitespace", body: "  \n", malformed: true},
	{name: "truncated object", body: `{"given_name":"Jane"`, malformed: true},
	{name: "missing value", body: `{"given_name":}`, malformed: true},
	{name: "trailing comma", body: `{"given_name":"Jane",}`, malformed: true},
	{name: "single quotes", body: `{'given_name':'Jane'}`, malformed: true},
	{name: "text", body: `given_name=Jane`, malformed: true},
	{name: "two objects", body: `{}{}`, malformed: true},
	{name: "array", body: `[{"given_name":"Jane"}]`},
	{name: "empty array", body: `[]`},
	{name: "string", body: `"Jane"`},
	{name: "number", body: `42`},
	{name: "boolean", body: `true`},
	{name: "null", body: `null`},
	{name: "null with spaces", body: ` null `},
}

func TestDecodeObjectNotAnObject(t *testing.T) {
	t.Parallel()
	tests := notObjectTests
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var in PatientInput
			fields, err := decodeObject([]byte(tt.body), &in)
			require.Error(t, err)
			assert.Empty(t, fields)
			if tt.malformed {
				assert.ErrorIs(t, err, errMalformedJSON)
				return
			}
			var apiErr *Error
			require.ErrorAs(t, err, &apiErr)
			assert.NotErrorIs(t, err, errMalformedJSON)
			assert.Equal(t, http.StatusBadRequest, apiErr.Status)
			assert.Equal(t, slugBadRequest, apiErr.Slug)
			assert.Equal(t, codeBadRequest, apiErr.Code)
			assert.Empty(t, apiErr.Validation)
		})
	}
}

func TestDecodeObjectNested(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       string
		want       decodeRoot
		wantFields map[string]string // field -> message
	}{
		{name: "empty object", body: `{}`},
		{
			name: "every level decoded",
			body: `{"name":"x","ratio":1.5,"Untaged":"u","middle":{"flag":true,"leaf":{"n":1,"s":"a","list":["p"]},"pleaf":{"n":2}}}`,
			want: decodeRoot{Name: "x", Ratio: 1.5, Untaged: "u", Middle: decodeMiddle{
				Flag: true, Leaf: decodeLeaf{N: 1, S: "a", List: []string{"p"}}, PLeaf: &decodeLeaf{N: 2},
			}},
		},
		{
			name: "wrong types named by path",
			body: `{"name":1,"ratio":"x","middle":{"flag":"yes","leaf":{"n":"1","s":2,"list":"p"},"pleaf":{"n":1.5}}}`,
			wantFields: map[string]string{
				"name":             "must be a string",
				"ratio":            "must be a number",
				"middle.flag":      "must be a boolean",
				"middle.leaf.n":    "must be an integer",
				"middle.leaf.s":    "must be a string",
				"middle.leaf.list": "must be an array",
				"middle.pleaf.n":   "must be an integer",
			},
		},
		{
			name: "unknown members named by path",
			body: `{"nope":1,"middle":{"nope":2,"leaf":{"nope":3}},"Skipped":"s","-":"d"}`,
			wantFields: map[string]string{
				"nope":             "is not a known field",
				"middle.nope":      "is not a known field",
				"middle.leaf.nope": "is not a known field",
				"Skipped":          "is not a known field",
				"-":                "is not a known field",
			},
		},
		{
			name: "null and non-object nested members",
			body: `{"middle":{"leaf":null,"pleaf":[1]}}`,
			wantFields: map[string]string{
				"middle.leaf":  "must not be null",
				"middle.pleaf": "must be an object",
			},
		},
		{
			name:       "nested object where a scalar belongs",
			body:       `{"name":{"first":"x"}}`,
			wantFields: map[string]string{"name": "must be a string"},
		},
		{
			name: "null on a plain member is ignored as encoding/json does",
			body: `{"name":null,"ratio":null}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got decodeRoot
			fields, err := decodeObject([]byte(tt.body), &got)
			require.NoError(t, err)
			want := tt.wantFields
			if want == nil {
				want = map[string]string{}
			}
			gotFields := map[string]string{}
			for _, f := range fields {
				assert.Equal(t, codeValidation, f.Code)
				_, dup := gotFields[f.Field]
				assert.False(t, dup, "field %s reported twice", f.Field)
				gotFields[f.Field] = f.Message
			}
			assert.Equal(t, want, gotFields)
			if len(want) == 0 {
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

func TestDecodeObjectEmbedded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       string
		want       decodeEmbedding
		wantFields []string
	}{
		{name: "embedded members are found", body: `{"id":"a","kind":"b","extra":"c"}`,
			want: decodeEmbedding{Extra: "c", DecodeBase: DecodeBase{ID: "a", Kind: "b"}}},
		{name: "embedded member wrong type", body: `{"id":1}`, wantFields: []string{"id"}},
		{name: "embedded type name is not a member", body: `{"DecodeBase":{"id":"a"}}`, wantFields: []string{"DecodeBase"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got decodeEmbedding
			fields, err := decodeObject([]byte(tt.body), &got)
			require.NoError(t, err)
			assert.Equal(t, nonNilStrings(tt.wantFields), entryFields(fields))
			if len(tt.wantFields) == 0 {
				assert.Equal(t, tt.want, got)
			}
		})
	}

	t.Run("admin patient create request", func(t *testing.T) {
		t.Parallel()
		var req AdminPatientCreateRequest
		fields, err := decodeObject([]byte(`{"patient_id":"p","partner_patient_id":"pp","given_name":"Jane","ihi_number":null,"australian_address":{"postcode":1}}`), &req)
		require.NoError(t, err)
		assert.Equal(t, []string{"australian_address.postcode"}, entryFields(fields))
		assert.Equal(t, "p", req.PatientID)
		assert.Equal(t, "pp", req.PartnerPatientID)
		assert.Equal(t, Optional[string]{Set: true, V: "Jane"}, req.GivenName)
		assert.Equal(t, Optional[string]{Set: true, Null: true}, req.IHINumber)
		require.NotNil(t, req.AustralianAddress)
	})
}

// TestDecodeObjectEmbeddedLikeEncodingJSON checks the claim of jsonFields'
// doc comment, "flattening embedded structs as encoding/json does", against
// encoding/json itself.
func TestDecodeObjectEmbeddedLikeEncodingJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		dst  func() any
	}{
		{name: "outer member shadows embedded member", body: `{"id":"outer","kind":"k"}`, dst: func() any { return &decodeShadowing{} }},
		{name: "unexported embedded struct type", body: `{"note":"n"}`, dst: func() any { return &decodeUnexportedEmbed{} }},
		{name: "embedded struct pointer", body: `{"id":"a","kind":"b"}`, dst: func() any { return &decodePointerEmbed{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := tt.dst()
			require.NoError(t, json.Unmarshal([]byte(tt.body), want))
			got := tt.dst()
			var fields []FieldError
			require.NotPanics(t, func() {
				var err error
				fields, err = decodeObject([]byte(tt.body), got)
				require.NoError(t, err)
			})
			assert.Empty(t, fields)
			assert.Equal(t, want, got)
		})
	}
}

// FuzzDecodeObject feeds arbitrary bytes to decodeObject and validate, as
// the patient handlers do: neither may panic, a refused body is a 400, and
// every entry names a field and says what is wrong.
func FuzzDecodeObject(f *testing.F) {
	for _, tt := range patientBodyTests {
		f.Add([]byte(tt.body))
	}
	for _, tt := range notObjectTests {
		f.Add([]byte(tt.body))
	}
	for _, b := range []string{
		`{"":1}`,
		`{"australian_address":{"":1}}`,
		`{"australian_address":{"australian_address":{}}}`,
		`{"given_name":"\u0000\ud800"}`,
		`{"given_name":"a","given_name":1}`,
		`{"dva_card_color":"G","dva_file_number":"   "}`,
		`{"date_of_birth":"0000-01-01","medicare_valid_to":"9999-12-31"}`,
		"{\"given_name\":\"\xff\xfe\"}",
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in PatientInput
		fields, err := decodeObject(body, &in)
		if err != nil {
			var apiErr *Error
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, http.StatusBadRequest, apiErr.Status)
			require.Empty(t, fields)
			return
		}
		for _, create := range []bool{false, true} {
			c := in
			c.normalize()
			all := append([]FieldError(nil), fields...)
			if verr := c.validate(validateToday, create); verr != nil {
				var internal validation.InternalError
				require.False(t, errors.As(verr, &internal), "internal error: %v", verr)
				vf := fieldErrors(verr)
				require.NotEmpty(t, vf, "validate error without entries: %v", verr)
				all = append(all, vf...)
			}
			for _, fe := range all {
				require.NotEmpty(t, fe.Field, "entry without a field in %+v for %q", all, body)
				require.NotEmpty(t, fe.Message, "entry %q without a message", fe.Field)
				require.Equal(t, codeValidation, fe.Code, "entry %q", fe.Field)
			}
		}
	})
}

// FuzzQuery: the strict query parser never panics, refuses exactly what
// url.ParseQuery reports as malformed, and otherwise reads the same values.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"", "limit=5", "limit=%zz", "a=1&a=2", "limit=5;x=1", "%zz=1", "a=%20b+c", "&&a=&=b", "k=%e2%82%ac"} {
		f.Add(s)
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, raw string) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.RawQuery = raw
		got, err := query(e.NewContext(req, httptest.NewRecorder()))
		want, wantErr := url.ParseQuery(raw)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("query(%q): error %v, url.ParseQuery: %v", raw, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("query(%q) = %v, url.ParseQuery = %v", raw, got, want)
		}
	})
}
