package app

import (
	"errors"
	"net/http"
	"strings"

	"github.com/invopop/validation"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// PartnerPatientView is the patient as the partner API returns it (spec
// 4.1): the ten members the spec shows are always present (null when not
// set), every other member when set.
type PartnerPatientView struct {
	PatientID               string           `json:"patient_id"`
	PartnerPatientID        *string          `json:"partner_patient_id,omitempty"`
	FamilyName              *string          `json:"family_name"`
	GivenName               *string          `json:"given_name"`
	DateOfBirth             *string          `json:"date_of_birth"`
	Sex                     *string          `json:"sex"`
	Phone                   *string          `json:"phone"`
	Email                   *string          `json:"email"`
	MedicareCardNumber      *string          `json:"medicare_card_number"`
	MedicareIRN             *string          `json:"medicare_irn"`
	MedicareValidTo         *string          `json:"medicare_valid_to"`
	Title                   *string          `json:"title,omitempty"`
	CTGEligible             *bool            `json:"ctg_eligible,omitempty"`
	IndigenousType          *string          `json:"indigenous_type,omitempty"`
	ConcessionPensionNumber *string          `json:"concession_pension_number,omitempty"`
	EntitlementNumber       *string          `json:"entitlement_number,omitempty"`
	IHINumber               *string          `json:"ihi_number,omitempty"`
	RACFID                  *string          `json:"racf_id,omitempty"`
	IsInpatient             *bool            `json:"is_inpatient,omitempty"`
	DVAFileNumber           *string          `json:"dva_file_number,omitempty"`
	DVACardColor            *string          `json:"dva_card_color,omitempty"`
	AustralianAddress       *storage.Address `json:"australian_address,omitempty"`
}

func partnerPatientView(p *storage.Patient) PartnerPatientView {
	f := &p.PatientFields
	v := PartnerPatientView{
		PatientID: p.ID, FamilyName: f.FamilyName, GivenName: f.GivenName, DateOfBirth: f.DateOfBirth, Sex: f.Sex,
		Phone: f.Phone, Email: f.Email, MedicareCardNumber: f.MedicareCardNumber, MedicareIRN: f.MedicareIRN,
		MedicareValidTo: f.MedicareValidTo, Title: f.Title, CTGEligible: f.CTGEligible, IndigenousType: f.IndigenousType,
		ConcessionPensionNumber: f.ConcessionPensionNumber, EntitlementNumber: f.EntitlementNumber, IHINumber: f.IHINumber,
		RACFID: f.RACFID, IsInpatient: f.IsInpatient, DVAFileNumber: f.DVAFileNumber, DVACardColor: f.DVACardColor,
		AustralianAddress: f.AustralianAddress,
	}
	if p.PartnerPatientID != "" {
		id := p.PartnerPatientID
		v.PartnerPatientID = &id
	}
	return v
}

// maxVerifications is how many demographic verification requests a patient
// keeps, newest last.
const maxVerifications = 20

var errPatientNotFound = errNotFound(slugPatientNotFound, "The patient does not exist for this organization and user.")

// errPatientUpdateFailed is the 500 of the patient update (spec 7.2).
var errPatientUpdateFailed = &Error{Status: http.StatusInternalServerError, Code: codeInternal, Slug: slugInternal,
	Title: titleInternal, Detail: "Failed to update patient"}

// patientBody is a request body holding the members of spec 2.3, and
// perhaps ids.
type patientBody interface {
	input() *PatientInput
	checkIDs() []FieldError
}

func (in *PatientInput) input() *PatientInput   { return in }
func (in *PatientInput) checkIDs() []FieldError { return nil }

// bindPatient decodes and validates a patient body, reporting every
// problem at once with status 422.
func (a *App) bindPatient(c echo.Context, dst patientBody, create bool) error {
	fields, err := a.decodePatient(c, dst, create)
	if err != nil {
		return err
	}
	if len(fields) > 0 {
		return errValidation(http.StatusUnprocessableEntity, dedupe(fields))
	}
	return nil
}

// decodePatient decodes and validates a patient body, returning its
// problems as field errors; err is for bodies that are not JSON objects.
func (a *App) decodePatient(c echo.Context, dst patientBody, create bool) ([]FieldError, error) {
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	if body == nil {
		body = []byte("{}")
	}
	fields, err := decodeObject(body, dst)
	if err != nil {
		return nil, err
	}
	in := dst.input()
	in.normalize()
	if verr := in.validate(a.today(), create); verr != nil {
		var internal validation.InternalError
		if errors.As(verr, &internal) {
			return nil, verr
		}
		fields = append(fields, fieldErrors(verr)...)
	}
	return append(fields, dst.checkIDs()...), nil
}

// PartnerPatientCreateRequest is the body of the partner's patient create:
// the members of spec 2.3 plus partner_patient_id.
type PartnerPatientCreateRequest struct {
	PartnerPatientID string `json:"partner_patient_id"`
	PatientInput
}

func (r *PartnerPatientCreateRequest) checkIDs() []FieldError {
	return checkField("partner_patient_id", r.PartnerPatientID, validation.RuneLength(0, 128))
}

// checkField validates one value into field errors.
func checkField(name string, value any, rules ...validation.Rule) []FieldError {
	if err := validation.Validate(value, rules...); err != nil {
		return []FieldError{{Field: name, Message: err.Error(), Code: codeValidation}}
	}
	return nil
}

// createPatient is POST .../users/{user_id}/patients (beyond the spec; the
// hosted service has it): 201 with the stored patient, 409 when the
// partner_patient_id is taken in the organization.
func (a *App) createPatient(c echo.Context) error {
	if pathUUID(c, "user_id") != nil {
		return errUserNotFound
	}
	var req PartnerPatientCreateRequest
	if err := a.bindPatient(c, &req, true); err != nil {
		return err
	}
	p := &storage.Patient{OrgID: callerOf(c).org.ID, UserID: c.Param("user_id"), PartnerPatientID: req.PartnerPatientID}
	req.patch(&p.PatientFields)
	err := a.store.CreatePatient(c.Request().Context(), p)
	switch {
	case errors.Is(err, storage.ErrAlreadyExists):
		return errConflict("A patient with this partner_patient_id already exists in the organization.").withCause(err)
	case errors.Is(err, storage.ErrNotFound):
		return errUserNotFound.withCause(err)
	case err != nil:
		return err
	}
	return a.created(c, "Patient created successfully", partnerPatientView(p))
}

// updatePatient is PUT .../patients/{patient_id} (spec 4.1): a partial
// update. A change to family_name, given_name, date_of_birth or sex records
// a pending demographic verification request on the patient.
func (a *App) updatePatient(c echo.Context) error {
	if pathUUID(c, "user_id", "patient_id") != nil {
		return errPatientNotFound
	}
	var in PatientInput
	fields, err := a.decodePatient(c, &in, false)
	if err != nil {
		return err
	}
	now := a.now().UTC()
	p, err := a.store.UpdatePatient(c.Request().Context(), callerOf(c).org.ID, c.Param("user_id"), c.Param("patient_id"),
		func(p *storage.Patient) error {
			before := p.PatientFields
			in.patch(&p.PatientFields)
			problems := fields
			if f := &p.PatientFields; f.DVACardColor != nil && (f.DVAFileNumber == nil || strings.TrimSpace(*f.DVAFileNumber) == "") {
				// Clearing the file number while the stored colour stays
				// would store what spec 4.1 rule 2 forbids. Checked against
				// the stored patient, with the request's own problems, so
				// that every problem is reported at once.
				problems = append(problems[:len(problems):len(problems)], FieldError{
					Field: "dva_file_number", Message: "is required while dva_card_color is set", Code: codeValidation})
			}
			if len(problems) > 0 {
				return errValidation(http.StatusUnprocessableEntity, dedupe(problems))
			}
			if changed := demographicChanges(&before, &p.PatientFields); len(changed) > 0 {
				p.Verifications = append(p.Verifications, storage.Verification{Status: "pending", RequestedAt: now, Fields: changed})
				if n := len(p.Verifications); n > maxVerifications {
					// Keep the newest: the record must not grow without bound.
					p.Verifications = append([]storage.Verification(nil), p.Verifications[n-maxVerifications:]...)
				}
			}
			return nil
		})
	var apiErr *Error
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.Is(err, storage.ErrNotFound):
		return errPatientNotFound.withCause(err)
	case errors.Is(err, storage.ErrTooLarge):
		return errTooLarge.withCause(err)
	case errors.Is(err, storage.ErrUnavailable), errors.Is(err, storage.ErrConflict):
		// The store could not serve now (a database switching its
		// primary, say): a 503 the client may try again, as everywhere.
		return err
	case err != nil:
		return errPatientUpdateFailed.withCause(err)
	}
	return a.ok(c, "Patient updated successfully", partnerPatientView(p))
}
