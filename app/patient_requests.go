package app

import (
	"errors"
	"regexp"
	"strings"
	"time"

	"github.com/invopop/validation"
	"github.com/invopop/validation/is"

	"github.com/rxgate/rxgate/storage"
)

// Field rules of spec 2.3 and 7.3.
var (
	// phonePattern: domestic 0 + a non-1 digit + 8 digits, or 61 (with or
	// without +) + a national number whose first digit is 2-9. Digits only.
	phonePattern    = regexp.MustCompile(`^(0[02-9][0-9]{8}|\+?61[2-9][0-9]{8})$`)
	ihiPattern      = regexp.MustCompile(`^[0-9]{16}$`)
	digitsPattern   = regexp.MustCompile(`^[0-9]+$`)
	postcodePattern = regexp.MustCompile(`^[0-9]{4}$`)

	sexes           = []any{"M", "F", "I", "N"}
	indigenousTypes = []any{"Aboriginal", "Torres Strait Islander", "Both", "Neither", "Prefer not to say"}
	dvaColors       = []any{"W", "O", "G"}
	states          = []any{"VIC", "NSW", "QLD", "WA", "SA", "TAS", "ACT", "NT"}
)

// maxFreeText bounds text members the spec gives no length for, so that a
// partner cannot store megabytes in a name.
const maxFreeText = 255

// dateLayout is the YYYY-MM-DD format of date members.
const dateLayout = "2006-01-02"

// notNull refuses JSON null on members that are not nullable in spec 2.3.
var notNull = validation.By(func(v any) error {
	if n, ok := v.(interface{ isNull() bool }); ok && n.isNull() {
		return errors.New("must not be null")
	}
	return nil
})

// nonEmpty refuses a supplied member that is empty or only spaces: the
// format and enum rules pass over empty values, and an empty phone, date
// or name is not a value.
var nonEmpty = validation.By(func(v any) error {
	blank := false
	switch o := v.(type) {
	case Optional[string]:
		blank = o.present() && strings.TrimSpace(o.V) == ""
	case Optional[flexString]:
		blank = o.present() && strings.TrimSpace(string(o.V)) == ""
	}
	if blank {
		return errors.New("must not be empty")
	}
	return nil
})

// requiredMember refuses an absent, null or empty member (patient create).
var requiredMember = validation.By(func(v any) error {
	if o, ok := v.(Optional[string]); ok && (!o.present() || strings.TrimSpace(o.V) == "") {
		return errors.New("is required")
	}
	return nil
})

// AddressInput is australian_address; all five members are required when
// the object is sent.
type AddressInput struct {
	StreetNumber string `json:"street_number"`
	StreetName   string `json:"street_name"`
	Suburb       string `json:"suburb"`
	State        string `json:"state"`
	Postcode     string `json:"postcode"`
}

// Validate checks the address rules of spec 2.3 (lengths in characters).
func (a AddressInput) Validate() error {
	return validation.ValidateStruct(&a,
		validation.Field(&a.StreetNumber, validation.Required, validation.RuneLength(1, 12)),
		validation.Field(&a.StreetName, validation.Required, validation.RuneLength(1, 100)),
		validation.Field(&a.Suburb, validation.Required, validation.RuneLength(1, 100)),
		validation.Field(&a.State, validation.Required, validation.In(states...)),
		validation.Field(&a.Postcode, validation.Required, validation.Match(postcodePattern).Error("must be exactly 4 digits")),
	)
}

// PatientInput is the body of a patient create or update: every member of
// spec 2.3, each absent, null or a value.
type PatientInput struct {
	FamilyName              Optional[string] `json:"family_name"`
	GivenName               Optional[string] `json:"given_name"`
	DateOfBirth             Optional[string] `json:"date_of_birth"`
	Sex                     Optional[string] `json:"sex"`
	Title                   Optional[string] `json:"title"`
	Phone                   Optional[string] `json:"phone"`
	Email                   Optional[string] `json:"email"`
	CTGEligible             Optional[bool]   `json:"ctg_eligible"`
	IndigenousType          Optional[string] `json:"indigenous_type"`
	ConcessionPensionNumber Optional[string] `json:"concession_pension_number"`
	EntitlementNumber       Optional[string] `json:"entitlement_number"`
	IHINumber               Optional[string] `json:"ihi_number"`
	RACFID                  Optional[string] `json:"racf_id"`
	IsInpatient             Optional[bool]   `json:"is_inpatient"`
	MedicareCardNumber      Optional[string] `json:"medicare_card_number"`
	MedicareIRN             Optional[string] `json:"medicare_irn"`
	MedicareValidTo         Optional[string] `json:"medicare_valid_to"`
	DVAFileNumber           Optional[string] `json:"dva_file_number"`
	DVACardColor            Optional[string] `json:"dva_card_color"`
	AustralianAddress       *AddressInput    `json:"australian_address"`
}

// normalize trims what the spec says is trimmed (medicare_irn).
func (in *PatientInput) normalize() {
	if in.MedicareIRN.present() {
		in.MedicareIRN.V = strings.TrimSpace(in.MedicareIRN.V)
	}
}

// validate checks every rule at once. today is the date against which
// date_of_birth may not be in the future; create makes the four
// demographic members required.
//
// dva_card_color needs dva_file_number in the same request (spec 4.1 rule
// 2: "supplied too"), even when one is already stored.
func (in *PatientInput) validate(today time.Time, create bool) error {
	text := []validation.Rule{notNull, validation.RuneLength(0, maxFreeText)}
	name := []validation.Rule{notNull, nonEmpty, validation.RuneLength(1, maxFreeText)}
	if create {
		name = append([]validation.Rule{requiredMember}, name...)
	}
	dob := []validation.Rule{notNull, nonEmpty, validation.Date(dateLayout).Error("must be a real date in YYYY-MM-DD format").
		Max(today).RangeError("must not be in the future")}
	sex := []validation.Rule{notNull, nonEmpty, validation.In(sexes...).Error("must be one of M, F, I, N")}
	if create {
		dob = append([]validation.Rule{requiredMember}, dob...)
		sex = append([]validation.Rule{requiredMember}, sex...)
	}
	var dvaFile []validation.Rule
	if in.DVACardColor.present() && (!in.DVAFileNumber.present() || strings.TrimSpace(in.DVAFileNumber.V) == "") {
		dvaFile = append(dvaFile, validation.By(func(any) error {
			return errors.New("is required when dva_card_color is provided")
		}))
	}
	dvaFile = append(dvaFile, validation.RuneLength(0, maxFreeText))
	return validation.ValidateStruct(in,
		validation.Field(&in.FamilyName, name...),
		validation.Field(&in.GivenName, name...),
		validation.Field(&in.DateOfBirth, dob...),
		validation.Field(&in.Sex, sex...),
		validation.Field(&in.Title, text...),
		validation.Field(&in.Phone, notNull, nonEmpty, validation.Match(phonePattern).Error("must be an Australian phone number: 10 digits starting with 0 (second digit not 1), or 61 with or without +, digits only")),
		validation.Field(&in.Email, notNull, nonEmpty, validation.RuneLength(0, maxFreeText), is.EmailFormat.Error("must be a valid email address")),
		validation.Field(&in.CTGEligible, notNull),
		validation.Field(&in.IndigenousType, notNull, nonEmpty, validation.In(indigenousTypes...).Error("must be one of Aboriginal, Torres Strait Islander, Both, Neither, Prefer not to say")),
		validation.Field(&in.ConcessionPensionNumber, text...),
		validation.Field(&in.EntitlementNumber, text...),
		validation.Field(&in.IHINumber, nonEmpty, validation.Match(ihiPattern).Error("must be exactly 16 digits")),
		validation.Field(&in.RACFID, text...),
		validation.Field(&in.IsInpatient, notNull),
		validation.Field(&in.MedicareCardNumber, validation.RuneLength(0, maxFreeText)),
		validation.Field(&in.MedicareIRN, nonEmpty, validation.RuneLength(0, maxFreeText), validation.Match(digitsPattern).Error("must contain only digits")),
		validation.Field(&in.MedicareValidTo, nonEmpty, validation.Date(dateLayout).Error("must be a real date in YYYY-MM-DD format")),
		validation.Field(&in.DVAFileNumber, dvaFile...),
		validation.Field(&in.DVACardColor, nonEmpty, validation.In(dvaColors...).Error("must be one of W, O, G")),
		validation.Field(&in.AustralianAddress),
	)
}

// patch applies the supplied members to f.
func (in *PatientInput) patch(f *storage.PatientFields) {
	in.FamilyName.apply(&f.FamilyName)
	in.GivenName.apply(&f.GivenName)
	in.DateOfBirth.apply(&f.DateOfBirth)
	in.Sex.apply(&f.Sex)
	in.Title.apply(&f.Title)
	in.Phone.apply(&f.Phone)
	in.Email.apply(&f.Email)
	in.CTGEligible.apply(&f.CTGEligible)
	in.IndigenousType.apply(&f.IndigenousType)
	in.ConcessionPensionNumber.apply(&f.ConcessionPensionNumber)
	in.EntitlementNumber.apply(&f.EntitlementNumber)
	in.IHINumber.apply(&f.IHINumber)
	in.RACFID.apply(&f.RACFID)
	in.IsInpatient.apply(&f.IsInpatient)
	in.MedicareCardNumber.apply(&f.MedicareCardNumber)
	in.MedicareIRN.apply(&f.MedicareIRN)
	in.MedicareValidTo.apply(&f.MedicareValidTo)
	in.DVAFileNumber.apply(&f.DVAFileNumber)
	in.DVACardColor.apply(&f.DVACardColor)
	if a := in.AustralianAddress; a != nil {
		f.AustralianAddress = &storage.Address{
			StreetNumber: a.StreetNumber, StreetName: a.StreetName, Suburb: a.Suburb, State: a.State, Postcode: a.Postcode,
		}
	}
}

// demographicChanges names the demographic members (spec 4.1 rule 1) whose
// value differs between before and after.
func demographicChanges(before, after *storage.PatientFields) []string {
	var changed []string
	for _, m := range []struct {
		name string
		a, b *string
	}{
		{"family_name", before.FamilyName, after.FamilyName},
		{"given_name", before.GivenName, after.GivenName},
		{"date_of_birth", before.DateOfBirth, after.DateOfBirth},
		{"sex", before.Sex, after.Sex},
	} {
		if (m.a == nil) != (m.b == nil) || (m.a != nil && *m.a != *m.b) {
			changed = append(changed, m.name)
		}
	}
	return changed
}
