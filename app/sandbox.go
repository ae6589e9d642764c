package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/storage"
)

// Fixed sandbox ids, so that documentation and scripts can name them.
const (
	SandboxPartnerID      = "0193a0e0-0000-7000-8000-000000000001"
	SandboxOrganizationID = "0193a0e0-0000-7000-8000-0000000000a1"
)

// sandboxTokenTTL is the lifetime of the tokens the sandbox prints.
const sandboxTokenTTL = 12 * time.Hour

// SandboxUser is a seeded user and a ready token for it.
type SandboxUser struct {
	Role   string `json:"role"`
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	Name   string `json:"name"`
	Token  string `json:"token"`
}

// SandboxPatient is a seeded patient as the sandbox prints it: ids and a
// name only (demo data, never a real person).
type SandboxPatient struct {
	PatientID     string `json:"patient_id"`
	Name          string `json:"name"`
	UserID        string `json:"user_id"` // the prescriber whose patient it is
	Prescriptions int    `json:"prescriptions"`
}

// SandboxFacts is everything `rxgate sandbox` prints, also written as JSON
// by --print-json.
type SandboxFacts struct {
	BaseURL     string `json:"base_url"`
	AdminURL    string `json:"admin_url"`
	AdminAPIKey string `json:"admin_api_key"`
	// ConsoleSignInURL signs its first visitor in to the console, once.
	ConsoleSignInURL   string        `json:"console_sign_in_url"`
	PartnerID          string        `json:"partner_id"`
	PartnerSecret      string        `json:"partner_secret"`
	OrganizationID     string        `json:"organization_id"`
	OrganizationSecret string        `json:"organization_secret"`
	Users              []SandboxUser `json:"users"`
	PatientIDs         []string      `json:"patient_ids"`
	// Patients are every seeded patient, each of RxUserID.
	Patients []SandboxPatient `json:"patients"`
	// RxPatientID is the patient with 60+ prescriptions.
	RxPatientID    string    `json:"rx_patient_id"`
	RxUserID       string    `json:"rx_user_id"`
	TokenExpiresAt time.Time `json:"token_expires_at"`
	Curl           []Command `json:"curl"`
}

// Command is a described shell command that works when pasted alone.
type Command struct {
	Title   string `json:"title"`
	Command string `json:"command"`
}

type seedUser struct {
	id, email, given, family, title string
	role                            storage.Role
}

var sandboxUsers = []seedUser{
	{"0193a0e0-0000-7000-8000-0000000000b1", "olivia.nguyen@harbourside.example", "Olivia", "Nguyen", "Dr", storage.RoleOwner},
	{"0193a0e0-0000-7000-8000-0000000000b2", "james.okafor@harbourside.example", "James", "Okafor", "Mr", storage.RoleAdmin},
	{"0193a0e0-0000-7000-8000-0000000000b3", "priya.raman@harbourside.example", "Priya", "Raman", "Dr", storage.RolePrescriber},
	{"0193a0e0-0000-7000-8000-0000000000b4", "liam.fitzgerald@harbourside.example", "Liam", "Fitzgerald", "Dr", storage.RolePrescriber},
	{"0193a0e0-0000-7000-8000-0000000000b5", "mei.chen@harbourside.example", "Mei", "Chen", "Ms", storage.RoleMember},
}

type seedPatient struct {
	id, given, family, dob, sex, phone, medicare, irn string
	addr                                              storage.Address
}

var sandboxPatients = []seedPatient{
	{"0193a0e0-0000-7000-8000-0000000000c1", "Charlotte", "Williams", "1984-03-12", "F", "0412345678", "2123456701", "1",
		storage.Address{StreetNumber: "42", StreetName: "Macquarie Street", Suburb: "Parramatta", State: "NSW", Postcode: "2150"}},
	{"0193a0e0-0000-7000-8000-0000000000c2", "Jack", "Thompson", "1952-11-30", "M", "0398765432", "3123456702", "2",
		storage.Address{StreetNumber: "7/118", StreetName: "Sydney Road", Suburb: "Brunswick", State: "VIC", Postcode: "3056"}},
	{"0193a0e0-0000-7000-8000-0000000000c3", "Aroha", "Walker", "1997-06-05", "F", "+61421987654", "4123456703", "1",
		storage.Address{StreetNumber: "15", StreetName: "Boundary Street", Suburb: "West End", State: "QLD", Postcode: "4101"}},
	{"0193a0e0-0000-7000-8000-0000000000c4", "Daniel", "Papadopoulos", "1971-09-21", "M", "0889123456", "5123456704", "3",
		storage.Address{StreetNumber: "3", StreetName: "Smith Street", Suburb: "Darwin City", State: "NT", Postcode: "0800"}},
	{"0193a0e0-0000-7000-8000-0000000000c5", "Sienna", "O'Brien", "2016-01-17", "F", "61733334444", "6123456705", "4",
		storage.Address{StreetNumber: "220", StreetName: "Hay Street", Suburb: "Subiaco", State: "WA", Postcode: "6008"}},
	{"0193a0e0-0000-7000-8000-0000000000c6", "Kirra", "Anderson", "1989-12-02", "N", "0261234567", "2223456706", "1",
		storage.Address{StreetNumber: "9", StreetName: "Northbourne Avenue", Suburb: "Braddon", State: "ACT", Postcode: "2612"}},
}

// sandboxPrescriptions is how many prescriptions the first patient has.
const sandboxPrescriptions = 64

var sandboxMedicines = []struct{ name, strength, form, route, qty, repeats, pbs, schedule string }{
	{"Amoxicillin", "500 mg", "capsule", "oral", "20", "0", "1889B", "4"},
	{"Atorvastatin", "40 mg", "tablet", "oral", "30", "5", "8215M", "4"},
	{"Metformin", "500 mg", "tablet, modified release", "oral", "120", "5", "8607X", "4"},
	{"Salbutamol", "100 microgram/dose", "inhalation, pressurised", "inhalation", "1", "5", "8625W", "3"},
	{"Perindopril", "5 mg", "tablet", "oral", "30", "5", "8842R", "4"},
	{"Sertraline", "50 mg", "tablet", "oral", "30", "5", "2236Y", "4"},
	{"Paracetamol with codeine", "500 mg/30 mg", "tablet", "oral", "20", "0", "1215Y", "8"},
	{"Esomeprazole", "20 mg", "tablet, enteric", "oral", "30", "5", "8331T", "4"},
}

// SeedSandbox fills an empty store with the sandbox's demo data and returns
// what `rxgate sandbox` prints. On a store seeded before (a kept
// --data-dir) it keeps the data and rotates the partner and organization
// secrets, since stored secrets are hashed and cannot be shown again.
func (a *App) SeedSandbox(ctx context.Context) (*SandboxFacts, error) {
	if a.issuer == nil {
		return nil, errors.New("app: the sandbox needs the built-in issuer")
	}
	partnerSecret, orgSecret := storage.NewSecret(), storage.NewSecret()
	_, err := a.store.GetOrganization(ctx, SandboxOrganizationID)
	switch {
	case err == nil:
		if _, err := a.store.SetPartnerSecret(ctx, SandboxPartnerID, storage.HashSecret(partnerSecret)); err != nil {
			return nil, err
		}
		if _, err := a.store.SetOrganizationSecret(ctx, SandboxOrganizationID, storage.HashSecret(orgSecret)); err != nil {
			return nil, err
		}
	case errors.Is(err, storage.ErrNotFound):
		if err := a.seed(ctx, partnerSecret, orgSecret); err != nil {
			return nil, fmt.Errorf("app: seed sandbox: %w", err)
		}
	default:
		return nil, err
	}

	f := &SandboxFacts{
		BaseURL: a.BaseURL(), AdminURL: a.AdminURL(), AdminAPIKey: a.cfg.Admin.APIKey, ConsoleSignInURL: a.ConsoleSignInURL(),
		PartnerID: SandboxPartnerID, PartnerSecret: partnerSecret,
		OrganizationID: SandboxOrganizationID, OrganizationSecret: orgSecret,
		RxPatientID: sandboxPatients[0].id, RxUserID: sandboxUsers[2].id,
	}
	for i, p := range sandboxPatients {
		f.PatientIDs = append(f.PatientIDs, p.id)
		n := 0
		if i == 0 {
			n = sandboxPrescriptions
		}
		f.Patients = append(f.Patients, SandboxPatient{PatientID: p.id, Name: p.given + " " + p.family, UserID: sandboxUsers[2].id, Prescriptions: n})
	}
	for _, u := range sandboxUsers {
		token, exp, err := a.issuer.Mint(auth.MintRequest{UserID: u.id, OrgID: SandboxOrganizationID, Scopes: auth.PartnerScopes, TTL: sandboxTokenTTL})
		if err != nil {
			return nil, err
		}
		f.TokenExpiresAt = exp.UTC()
		f.Users = append(f.Users, SandboxUser{Role: string(u.role), UserID: u.id, Email: u.email, Name: u.title + " " + u.given + " " + u.family, Token: token})
	}
	f.Curl = sandboxCommands(f)
	return f, nil
}

func (a *App) seed(ctx context.Context, partnerSecret, orgSecret string) error {
	if err := a.store.CreatePartner(ctx, &storage.Partner{ID: SandboxPartnerID, Name: "Sandbox Partner Pty Ltd", SecretHash: storage.HashSecret(partnerSecret)}); err != nil {
		return err
	}
	org := &storage.Organization{ID: SandboxOrganizationID, Name: "Harbourside Family Practice", PartnerID: SandboxPartnerID,
		AllowedScopes: auth.PartnerScopes, SecretHash: storage.HashSecret(orgSecret)}
	if err := a.store.CreateOrganization(ctx, org); err != nil {
		return err
	}
	for _, u := range sandboxUsers {
		err := a.store.CreateUser(ctx, &storage.User{OrgID: org.ID, ID: u.id, Email: u.email, GivenName: u.given, FamilyName: u.family, Title: u.title, Role: u.role})
		if err != nil {
			return err
		}
	}
	prescriber := sandboxUsers[2].id
	for i, sp := range sandboxPatients {
		email := strings.ToLower(sp.given) + "." + strings.ToLower(strings.ReplaceAll(sp.family, "'", "")) + "@example.com"
		addr := sp.addr
		p := &storage.Patient{OrgID: org.ID, UserID: prescriber, ID: sp.id, PartnerPatientID: fmt.Sprintf("HFP-%05d", 1001+i),
			PatientFields: storage.PatientFields{
				GivenName: &sp.given, FamilyName: &sp.family, DateOfBirth: &sp.dob, Sex: &sp.sex, Phone: &sp.phone,
				Email: &email, MedicareCardNumber: &sp.medicare, MedicareIRN: &sp.irn, AustralianAddress: &addr,
			}}
		if i == 1 {
			file, color := "NX123456", "G"
			p.DVAFileNumber, p.DVACardColor = &file, &color
		}
		if err := a.store.CreatePatient(ctx, p); err != nil {
			return err
		}
	}

	drugs := []storage.CustomDrug{
		{OrgID: org.ID, ItemGenericName: "Hydrocortisone 1% in sorbolene", ItemStrength: "1%", ItemForm: "cream", RouteOfAdministration: "topical",
			Quantity: "100", MaxRepeats: "2", PoisonClass: "S2", CustomProductID: "HFP-COMP-001", Description: "Compounded in-house"},
		{OrgID: org.ID, ItemGenericName: "Magic mouthwash", ItemStrength: "150 mL", ItemForm: "oral liquid", RouteOfAdministration: "oral",
			Quantity: "1", MaxRepeats: "1", PoisonClass: "S4", PatientInstructions: "Rinse 10 mL for one minute and spit, four times a day"},
		{OrgID: org.ID, ItemGenericName: "Melatonin", ItemStrength: "2 mg", ItemForm: "capsule", RouteOfAdministration: "oral",
			Quantity: "30", MaxRepeats: "0", PoisonClass: "S4", ItemTradeName: "Compounded melatonin"},
		{OrgID: org.ID, UserID: prescriber, ItemGenericName: "Lidocaine 5% in white soft paraffin", ItemStrength: "5%", ItemForm: "ointment",
			RouteOfAdministration: "topical", Quantity: "30", MaxRepeats: "1", PoisonClass: "S2", DoctorInstructions: "Apply before procedure"},
		{OrgID: org.ID, UserID: prescriber, ItemGenericName: "Omeprazole suspension", ItemStrength: "2 mg/mL", ItemForm: "oral suspension",
			RouteOfAdministration: "oral", Quantity: "100", MaxRepeats: "3", PoisonClass: "S4", BrandName: "Harbourside Compounding"},
	}
	if err := a.store.CreateCustomDrugs(ctx, drugs); err != nil {
		return err
	}

	// 64 prescriptions for the first patient, one every ~5 days back from
	// now, mostly Active with some Ceased and Error, so pagination shows.
	patient := sandboxPatients[0].id
	start := a.now().UTC().Add(-sandboxPrescriptions * 5 * 24 * time.Hour)
	for i := range sandboxPrescriptions {
		m := sandboxMedicines[i%len(sandboxMedicines)]
		delivery := storage.Delivery{Method: "SMS", RecipientType: "PATIENT", Destination: sandboxPatients[0].phone}
		if i%3 == 1 {
			delivery = storage.Delivery{Method: "EMAIL", RecipientType: "PHARMACY", Destination: "dispensary@harbourpharmacy.example",
				Pharmacy: &storage.Pharmacy{PharmacyID: "PH-20417", Name: "Harbour Pharmacy Parramatta"}}
		}
		rx := &storage.Prescription{
			OrgID: org.ID, UserID: prescriber, PatientID: patient, CreatedAt: start.Add(time.Duration(i) * 5 * 24 * time.Hour),
			PrescriptionItem: storage.PrescriptionItem{
				ItemName: m.name, ItemStrength: m.strength, ItemForm: m.form, RouteAdministration: m.route,
				Quantity: m.qty, NumberOfRepeatsAuthorised: m.repeats, RepeatIntervals: "0", PBSCode: m.pbs, ScheduleNumber: m.schedule,
				PatientInstructions: "Take as directed", ReasonForPrescribing: "Ongoing management", MySLConsent: true,
				PrescriberScriptNumber: fmt.Sprintf("%06d", 100200+i),
			},
			Delivery: delivery,
		}
		if i%16 == 5 {
			rx.CustomDrugDetails = storage.CustomDrugDetails{CustomProductID: "HFP-COMP-001"}
			rx.ItemName, rx.PBSCode = "Hydrocortisone 1% in sorbolene", ""
		}
		rx.SCID = storage.NewSCID()
		rx.URL = a.BaseURL() + "/scripts/" + rx.SCID
		if err := a.store.CreatePrescription(ctx, rx); err != nil {
			return err
		}
		var status string
		var rxErr *storage.PrescriptionError
		switch {
		case i%7 == 3:
			status = storage.StatusCeased
		case i%11 == 6:
			status, rxErr = storage.StatusError, &storage.PrescriptionError{Description: "Prescription exchange rejected the token: duplicate delivery"}
		default:
			continue
		}
		_, err := a.store.UpdatePrescription(ctx, org.ID, prescriber, patient, rx.SCID, func(p *storage.Prescription) error {
			p.Status, p.Error = status, rxErr
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// sandboxCommands are curl commands with every value inlined, so each one
// works pasted alone.
func sandboxCommands(f *SandboxFacts) []Command {
	prescriber := f.Users[2]
	org := f.OrganizationID
	auth := func(token string) string {
		return fmt.Sprintf(" -H 'Authorization: Bearer %s' -H 'x-organization-secret: %s'", token, f.OrganizationSecret)
	}
	return []Command{
		{"Get a token from /v1/token, as the hosted service issues them", fmt.Sprintf(
			"curl -s -X POST '%s/v1/token' -H 'Content-Type: application/json' -H 'x-partner-id: %s' -H 'x-partner-secret: %s' -H 'x-organization-id: %s' -H 'x-organization-secret: %s' -H 'x-user-id: %s' -d '{\"grantType\":\"client_credentials\",\"scope\":[\"read:patient_prescription\",\"update:patient\"]}'",
			f.BaseURL, f.PartnerID, f.PartnerSecret, org, f.OrganizationSecret, prescriber.UserID)},
		{"List the first page of a patient's prescriptions (newest first; pass pagination.lastKey as ?lastKey= for the next)", fmt.Sprintf(
			"curl -s '%s/v1/organizations/%s/users/%s/patients/%s/prescriptions?limit=5'%s", f.BaseURL, org, f.RxUserID, f.RxPatientID, auth(prescriber.Token))},
		{"Update a patient (only the members sent change)", fmt.Sprintf(
			"curl -s -X PUT '%s/v1/organizations/%s/users/%s/patients/%s'%s -H 'Content-Type: application/json' -d '{\"phone\":\"0498765432\",\"australian_address\":{\"street_number\":\"12\",\"street_name\":\"George Street\",\"suburb\":\"Sydney\",\"state\":\"NSW\",\"postcode\":\"2000\"}}'",
			f.BaseURL, org, f.RxUserID, f.RxPatientID, auth(prescriber.Token))},
		{"List a prescriber's custom drugs (organization-level and their own)", fmt.Sprintf(
			"curl -s '%s/v1/organizations/%s/users/%s/custom-drugs'%s", f.BaseURL, org, prescriber.UserID, auth(prescriber.Token))},
		{"List the organization's users (an admin token)", fmt.Sprintf(
			"curl -s '%s/v1/organizations/%s/users?limit=3'%s", f.BaseURL, org, auth(f.Users[1].Token))},
		{"Validate the organization (needed once before webhooks are sent)", fmt.Sprintf(
			"curl -s '%s/v1/organizations/%s/validate'%s", f.BaseURL, org, auth(f.Users[0].Token))},
		{"Read a patient through the operator API", fmt.Sprintf(
			"curl -s '%s/admin/v1/organizations/%s/users/%s/patients/%s' -H 'Authorization: Bearer %s'",
			f.AdminURL, org, f.RxUserID, f.RxPatientID, f.AdminAPIKey)},
		{"Register a webhook endpoint for `rxgate listen --port 9000` (the answer shows its secret once)", fmt.Sprintf(
			"curl -s -X POST '%s/admin/v1/webhook-endpoints' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"partner_id\":\"%s\",\"url\":\"http://127.0.0.1:9000/\"}'",
			f.AdminURL, f.AdminAPIKey, f.PartnerID)},
		{"Create a prescription through the operator API (emits prescription.created once the organization is validated)", fmt.Sprintf(
			"curl -s -X POST '%s/admin/v1/organizations/%s/users/%s/patients/%s/prescriptions' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"item_name\":\"Amoxicillin\",\"item_strength\":\"500 mg\",\"item_form\":\"capsule\",\"route_administration\":\"oral\",\"quantity\":\"20\",\"number_of_repeats_authorised\":\"0\",\"delivery\":{\"method\":\"SMS\",\"recipient_type\":\"PATIENT\",\"destination\":\"0412345678\"}}'",
			f.AdminURL, org, f.RxUserID, f.RxPatientID, f.AdminAPIKey)},
		{"Mint a token through the operator API", fmt.Sprintf(
			"curl -s -X POST '%s/admin/v1/tokens' -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '{\"organization_id\":\"%s\",\"user_id\":\"%s\",\"scopes\":[\"read:patient_prescription\"],\"ttl_seconds\":3600}'",
			f.AdminURL, f.AdminAPIKey, org, prescriber.UserID)},
	}
}
