package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/invopop/validation"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/config"
	"github.com/rxgate/rxgate/storage"
)

// patientFuzzApp is a real App on an in-memory store with one prescriber
// and one patient, and what a partner request to update that patient
// needs.
type patientFuzzApp struct {
	app                *App
	handler            http.Handler
	org, user, patient string
	orgSecret, token   string
	baseline           storage.PatientFields
	log                *lockedBuffer
	path               string
	ctx                context.Context
}

// fuzzBaseline is the patient every fuzz input starts from: every member
// of spec 2.3 set, so that an input can clear or change any of them.
func fuzzBaseline() storage.PatientFields {
	return storage.PatientFields{
		FamilyName: new("Citizen"), GivenName: new("Jane"), DateOfBirth: new("1980-06-15"), Sex: new("F"), Title: new("Ms"),
		Phone: new("0412345678"), Email: new("jane@example.com"), CTGEligible: new(true), IndigenousType: new("Neither"),
		ConcessionPensionNumber: new("123456789A"), EntitlementNumber: new("E123"), IHINumber: new("8003608166690503"),
		RACFID: new("R1"), IsInpatient: new(false), MedicareCardNumber: new("2123456701"), MedicareIRN: new("1"),
		MedicareValidTo: new("2027-05-31"), DVAFileNumber: new("NX123456"), DVACardColor: new("G"),
		AustralianAddress: &storage.Address{StreetNumber: "1", StreetName: "Collins Street", Suburb: "Melbourne", State: "VIC", Postcode: "3000"},
	}
}

func newPatientFuzzApp(tb testing.TB) *patientFuzzApp {
	tb.Helper()
	return newPatientAppWith(tb, nil)
}

// newPatientAppWith is newPatientFuzzApp with the configuration changed
// by edit (when not nil).
func newPatientAppWith(tb testing.TB, edit func(*config.Config)) *patientFuzzApp {
	tb.Helper()
	// Only errors are logged (a 500's cause), so the buffer stays small
	// however long the fuzzing runs.
	log := &lockedBuffer{}
	a, store := newTestAppWith(tb, Options{Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelError}))}, edit)

	ctx := context.Background()
	secret := storage.NewSecret()
	p := &storage.Partner{Name: "Fuzz", SecretHash: storage.HashSecret(storage.NewSecret())}
	require.NoError(tb, store.CreatePartner(ctx, p))
	o := &storage.Organization{Name: "Fuzz Clinic", PartnerID: p.ID, AllowedScopes: auth.PartnerScopes, SecretHash: storage.HashSecret(secret)}
	require.NoError(tb, store.CreateOrganization(ctx, o))
	u := &storage.User{OrgID: o.ID, Email: "gp@fuzz.example", GivenName: "Grace", FamilyName: "Hopper", Title: "Dr", Role: storage.RolePrescriber}
	require.NoError(tb, store.CreateUser(ctx, u))
	pt := &storage.Patient{OrgID: o.ID, UserID: u.ID, PartnerPatientID: "fuzz-1", PatientFields: fuzzBaseline()}
	require.NoError(tb, store.CreatePatient(ctx, pt))
	tok, _, err := a.Issuer().Mint(auth.MintRequest{UserID: u.ID, OrgID: o.ID, Scopes: []string{"update:patient"}, TTL: 24 * time.Hour})
	require.NoError(tb, err)
	return &patientFuzzApp{
		app: a, handler: a.PartnerHandler(), org: o.ID, user: u.ID, patient: pt.ID, orgSecret: secret, token: tok,
		baseline: fuzzBaseline(), log: log, ctx: ctx,
		path: a.cfg.HTTP.BasePath + "/v1/organizations/" + o.ID + "/users/" + u.ID + "/patients/" + pt.ID,
	}
}

// reset puts the patient back to the baseline, so that every input starts
// from the same state and a failure reproduces from its input alone.
func (f *patientFuzzApp) reset(tb testing.TB) {
	tb.Helper()
	_, err := f.app.store.UpdatePatient(f.ctx, f.org, f.user, f.patient, func(p *storage.Patient) error {
		p.PatientFields = fuzzBaseline()
		p.Verifications = nil
		return nil
	})
	require.NoError(tb, err)
}

// put sends body as the JSON body of the update.
func (f *patientFuzzApp) put(body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPut, f.path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set(headerOrganizationSecret, f.orgSecret)
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	return rec
}

// storedProblems re-expresses the stored patient as an update body and
// returns what the handler's decoding and validation say about it: a
// stored value is valid exactly when it could have been sent.
func (f *patientFuzzApp) storedProblems(tb testing.TB, p *storage.Patient) (body []byte, problems []FieldError) {
	tb.Helper()
	body, err := json.Marshal(p.PatientFields)
	require.NoError(tb, err)
	var in PatientInput
	fields, err := decodeObject(body, &in)
	require.NoError(tb, err, "the stored patient does not decode: %s", body)
	if in.MedicareIRN.present() && in.MedicareIRN.V != strings.TrimSpace(in.MedicareIRN.V) {
		fields = append(fields, FieldError{Field: "medicare_irn", Message: "is stored untrimmed", Code: codeValidation})
	}
	if verr := in.validate(f.app.today(), false); verr != nil {
		var internal validation.InternalError
		require.False(tb, errors.As(verr, &internal), "validate returned an internal error: %v", verr)
		fields = append(fields, fieldErrors(verr)...)
	}
	return body, fields
}

// fuzzEnvelope is the part of an answer the fuzz target checks.
type fuzzEnvelope struct {
	StatusCode int `json:"statusCode"`
	Data       struct {
		PatientID string `json:"patient_id"`
	} `json:"data"`
	Error struct {
		Validation []FieldError `json:"validation"`
	} `json:"error"`
}

// patientFuzzSeeds are bodies beyond patientBodyTests: edges of each rule
// of app/patient_requests_test.go's tables, and the DVA and address cases
// that interact with what is stored.
var patientFuzzSeeds = []string{
	`{"phone":"0412345678"}`,
	`{"phone":"+61312345678"}`,
	`{"phone":"0123456789"}`,
	`{"phone":"04-1234-5678"}`,
	`{"phone":" 0412345678 "}`,
	`{"date_of_birth":"2023-02-30"}`,
	`{"date_of_birth":"2024-02-29","medicare_valid_to":"2023-02-29"}`,
	`{"date_of_birth":"2999-01-01"}`,
	`{"sex":"m"}`,
	`{"indigenous_type":"Torres Strait Islander"}`,
	`{"email":"not-an-email"}`,
	`{"email":""}`,
	`{"ihi_number":"800360816669050"}`,
	`{"ihi_number":""}`,
	`{"medicare_irn":" 2 "}`,
	`{"medicare_irn":"   "}`,
	`{"medicare_irn":"1a"}`,
	`{"medicare_card_number":""}`,
	`{"title":""}`,
	`{"dva_card_color":"W"}`,
	`{"dva_card_color":"W","dva_file_number":"QX1"}`,
	`{"dva_card_color":"G","dva_file_number":"   "}`,
	`{"dva_file_number":"QX2"}`,
	`{"dva_card_color":null}`,
	// One nullable member cleared alone (TestPatientInputPatch clears
	// them together).
	`{"ihi_number":null}`,
	`{"medicare_card_number":null}`,
	`{"medicare_irn":null}`,
	`{"medicare_valid_to":null}`,
	`{"dva_file_number":null}`,
	`{"dva_file_number":""}`,
	`{"australian_address":{"street_number":"1","street_name":"Collins Street","suburb":"Melbourne","state":"VIC","postcode":"0800"}}`,
	`{"australian_address":{"street_number":"","street_name":"Collins Street","suburb":"Melbourne","state":"VIC","postcode":"3000"}}`,
	`{"australian_address":{}}`,
	`{"given_name":"\u0000\ud800"}`,
	"{\"given_name\":\"\xff\xfe\"}",
	`{"given_name":"a","given_name":1}`,
	`{"":1}`,
	`[]`,
	`null`,
	`{"given_name":`,
	``,
}

// FuzzPatientUpdate PUTs arbitrary bytes as the JSON body of the partner
// patient update (spec 4.1) through the real handler, with a valid token,
// on a patient reset to a full baseline before each input. It asserts that
// the answer is never a 500, that every 422 lists at least one field, and
// that whatever the answer, the stored patient is one a client could have
// sent: re-expressed as a body it passes the update's decoding and
// validation.
func FuzzPatientUpdate(f *testing.F) {
	for _, tt := range patientBodyTests {
		f.Add([]byte(tt.body))
	}
	for _, b := range patientFuzzSeeds {
		f.Add([]byte(b))
	}
	fa := newPatientFuzzApp(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		fa.reset(t)
		rec := fa.put(body)
		require.NotEqual(t, http.StatusInternalServerError, rec.Code, "body %q answered 500: %s; log: %s", body, rec.Body, fa.log.String())
		var env fuzzEnvelope
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &env), "body %q: the answer is not JSON: %s", body, rec.Body)
		require.Equal(t, rec.Code, env.StatusCode, "statusCode")
		switch rec.Code {
		case http.StatusOK:
			require.Equal(t, fa.patient, env.Data.PatientID, "body %q", body)
		case http.StatusUnprocessableEntity:
			require.NotEmpty(t, env.Error.Validation, "body %q: a 422 without validation entries: %s", body, rec.Body)
			for _, fe := range env.Error.Validation {
				require.NotEmpty(t, fe.Field, "body %q: an entry without a field: %s", body, rec.Body)
				require.NotEmpty(t, fe.Message, "body %q: entry %q without a message", body, fe.Field)
				require.Equal(t, codeValidation, fe.Code, "body %q: entry %q", body, fe.Field)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("body %q answered %d: %s", body, rec.Code, rec.Body)
		}

		stored, err := fa.app.store.GetPatient(fa.ctx, fa.org, fa.user, fa.patient)
		require.NoError(t, err)
		if rec.Code != http.StatusOK {
			require.Equal(t, fa.baseline, stored.PatientFields, "body %q answered %d but changed the patient", body, rec.Code)
			require.Empty(t, stored.Verifications, "body %q answered %d but recorded a verification", body, rec.Code)
		}
		storedBody, problems := fa.storedProblems(t, stored)
		require.Empty(t, problems, "body %q (answered %d) stored a patient that is not valid: %s", body, rec.Code, storedBody)
	})
}
