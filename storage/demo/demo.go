// Package demo writes the sandbox's demo data into a store: a partner, an
// organization, its users, their patients, custom drugs and a patient
// with enough prescriptions to page through. The people are made up,
// never real. The ids are fixed, so that documentation and scripts can
// name them; the secrets are new on every Seed, since a store keeps only
// their hashes and cannot show them again.
package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rxgate/rxgate/storage"
)

// Fixed demo ids, so that documentation and scripts can name them.
const (
	PartnerID      = "0193a0e0-0000-7000-8000-000000000001"
	OrganizationID = "0193a0e0-0000-7000-8000-0000000000a1"
)

// Prescriptions is how many prescriptions the first patient has.
const Prescriptions = 64

// Options are what the demo data needs beyond the store.
type Options struct {
	// Scopes are the organization's allowed scopes (every partner scope).
	Scopes []string
	// BaseURL is the partner API's URL, under which each prescription's
	// script URL lies.
	BaseURL string
	// Now is the clock the prescriptions are dated back from; nil means
	// time.Now.
	Now func() time.Time
}

// User is a seeded user.
type User struct {
	ID, Email, GivenName, FamilyName, Title string
	Role                                    storage.Role
}

// Name is the user's title and names, as the sandbox prints them.
func (u User) Name() string { return u.Title + " " + u.GivenName + " " + u.FamilyName }

// Patient is a seeded patient: its id, name, prescriber and how many
// prescriptions it has.
type Patient struct {
	ID, Name, UserID string
	Prescriptions    int
}

// Seeded is what Seed made or found: the fixed ids, the new secrets, the
// users and the patients.
type Seeded struct {
	PartnerID, PartnerSecret           string
	OrganizationID, OrganizationSecret string
	Users                              []User
	Patients                           []Patient
	// PrescriberID is the user whose patients they all are.
	PrescriberID string
	// RxPatientID is the patient with Prescriptions prescriptions.
	RxPatientID string
}

var users = []User{
	{"0193a0e0-0000-7000-8000-0000000000b1", "olivia.nguyen@harbourside.example", "Olivia", "Nguyen", "Dr", storage.RoleOwner},
	{"0193a0e0-0000-7000-8000-0000000000b2", "james.okafor@harbourside.example", "James", "Okafor", "Mr", storage.RoleAdmin},
	{"0193a0e0-0000-7000-8000-0000000000b3", "priya.raman@harbourside.example", "Priya", "Raman", "Dr", storage.RolePrescriber},
	{"0193a0e0-0000-7000-8000-0000000000b4", "liam.fitzgerald@harbourside.example", "Liam", "Fitzgerald", "Dr", storage.RolePrescriber},
	{"0193a0e0-0000-7000-8000-0000000000b5", "mei.chen@harbourside.example", "Mei", "Chen", "Ms", storage.RoleMember},
}

// rxPrescriber is the user whose patients they all are.
var rxPrescriber = users[2]

type seedPatient struct {
	id, given, family, dob, sex, phone, medicare, irn string
	addr                                              storage.Address
}

var patients = []seedPatient{
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

var medicines = []struct{ name, strength, form, route, qty, repeats, pbs, schedule string }{
	{"Amoxicillin", "500 mg", "capsule", "oral", "20", "0", "1889B", "4"},
	{"Atorvastatin", "40 mg", "tablet", "oral", "30", "5", "8215M", "4"},
	{"Metformin", "500 mg", "tablet, modified release", "oral", "120", "5", "8607X", "4"},
	{"Salbutamol", "100 microgram/dose", "inhalation, pressurised", "inhalation", "1", "5", "8625W", "3"},
	{"Perindopril", "5 mg", "tablet", "oral", "30", "5", "8842R", "4"},
	{"Sertraline", "50 mg", "tablet", "oral", "30", "5", "2236Y", "4"},
	{"Paracetamol with codeine", "500 mg/30 mg", "tablet", "oral", "20", "0", "1215Y", "8"},
	{"Esomeprazole", "20 mg", "tablet, enteric", "oral", "30", "5", "8331T", "4"},
}

// Seed fills an empty store with the demo data and returns what it made.
// On a store seeded before (the sandbox's kept --data-dir) it keeps the
// data and rotates the partner and organization secrets.
func Seed(ctx context.Context, store storage.Store, opts Options) (*Seeded, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	partnerSecret, orgSecret := storage.NewSecret(), storage.NewSecret()
	_, err := store.GetOrganization(ctx, OrganizationID)
	switch {
	case err == nil:
		if _, err := store.SetPartnerSecret(ctx, PartnerID, storage.HashSecret(partnerSecret)); err != nil {
			return nil, err
		}
		if _, err := store.SetOrganizationSecret(ctx, OrganizationID, storage.HashSecret(orgSecret)); err != nil {
			return nil, err
		}
	case errors.Is(err, storage.ErrNotFound):
		if err := seed(ctx, store, opts, partnerSecret, orgSecret); err != nil {
			return nil, fmt.Errorf("demo: seed: %w", err)
		}
	default:
		return nil, err
	}
	s := &Seeded{
		PartnerID: PartnerID, PartnerSecret: partnerSecret,
		OrganizationID: OrganizationID, OrganizationSecret: orgSecret,
		Users: append([]User(nil), users...), PrescriberID: rxPrescriber.ID, RxPatientID: patients[0].id,
	}
	for i, p := range patients {
		n := 0
		if i == 0 {
			n = Prescriptions
		}
		s.Patients = append(s.Patients, Patient{ID: p.id, Name: p.given + " " + p.family, UserID: rxPrescriber.ID, Prescriptions: n})
	}
	return s, nil
}

// seed writes the demo data into an empty store.
func seed(ctx context.Context, store storage.Store, opts Options, partnerSecret, orgSecret string) error {
	if err := store.CreatePartner(ctx, &storage.Partner{ID: PartnerID, Name: "Sandbox Partner Pty Ltd", SecretHash: storage.HashSecret(partnerSecret)}); err != nil {
		return err
	}
	org := &storage.Organization{ID: OrganizationID, Name: "Harbourside Family Practice", PartnerID: PartnerID,
		AllowedScopes: opts.Scopes, SecretHash: storage.HashSecret(orgSecret)}
	if err := store.CreateOrganization(ctx, org); err != nil {
		return err
	}
	for _, u := range users {
		err := store.CreateUser(ctx, &storage.User{OrgID: org.ID, ID: u.ID, Email: u.Email, GivenName: u.GivenName, FamilyName: u.FamilyName, Title: u.Title, Role: u.Role})
		if err != nil {
			return err
		}
	}
	prescriber := rxPrescriber.ID
	for i, sp := range patients {
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
		if err := store.CreatePatient(ctx, p); err != nil {
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
	if err := store.CreateCustomDrugs(ctx, drugs); err != nil {
		return err
	}

	// 64 prescriptions for the first patient, one every ~5 days back from
	// now, mostly Active with some Ceased and Error, so pagination shows.
	patient := patients[0].id
	start := opts.Now().UTC().Add(-Prescriptions * 5 * 24 * time.Hour)
	for i := range Prescriptions {
		m := medicines[i%len(medicines)]
		delivery := storage.Delivery{Method: "SMS", RecipientType: "PATIENT", Destination: patients[0].phone}
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
		rx.URL = opts.BaseURL + "/scripts/" + rx.SCID
		if err := store.CreatePrescription(ctx, rx); err != nil {
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
		_, err := store.UpdatePrescription(ctx, org.ID, prescriber, patient, rx.SCID, func(p *storage.Prescription) error {
			p.Status, p.Error = status, rxErr
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
