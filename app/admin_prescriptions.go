package app

import (
	"net/http"
	"regexp"

	"github.com/invopop/validation"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// scidPattern is a supplied scid: 18 characters of digits and capitals.
var scidPattern = regexp.MustCompile(`^[0-9A-Z]{18}$`)

// PrescriptionCreateRequest is the body of the operator's prescription
// create: the members of spec 2.5 that the prescriber chooses
// (storage.PrescriptionItem, the delivery, optionally the type and scid).
// The server assigns url, created_date, status and prescriber.
type PrescriptionCreateRequest struct {
	PrescriptionType string `json:"prescription_type"`
	SCID             string `json:"scid"`
	storage.PrescriptionItem
	Delivery DeliveryInput `json:"delivery"`
}

// DeliveryInput is a prescription's delivery (spec 2.5).
type DeliveryInput struct {
	Method        string            `json:"method"`
	RecipientType string            `json:"recipient_type"`
	Destination   string            `json:"destination"`
	Pharmacy      *storage.Pharmacy `json:"pharmacy"`
}

// Validate checks the delivery.
func (d DeliveryInput) Validate() error {
	return validation.ValidateStruct(&d,
		validation.Field(&d.Method, validation.In("EMAIL", "SMS").Error("must be EMAIL or SMS")),
		validation.Field(&d.RecipientType, validation.In("PHARMACY", "PATIENT").Error("must be PHARMACY or PATIENT")),
		validation.Field(&d.Destination, validation.RuneLength(0, maxFreeText)),
	)
}

// Validate checks the request.
func (r *PrescriptionCreateRequest) Validate() error {
	text := validation.RuneLength(0, maxFreeText)
	return validation.ValidateStruct(r,
		validation.Field(&r.PrescriptionType, validation.In("ELECTRONIC").Error("must be ELECTRONIC")),
		validation.Field(&r.SCID, validation.Match(scidPattern).Error("must be 18 characters of 0-9 and A-Z")),
		validation.Field(&r.ItemName, validation.Required, text),
		validation.Field(&r.Quantity, validation.Required, validation.RuneLength(1, 20)),
		validation.Field(&r.NumberOfRepeatsAuthorised, validation.RuneLength(0, 20)),
		validation.Field(&r.RepeatIntervals, validation.RuneLength(0, 20)),
		validation.Field(&r.PBSCode, validation.RuneLength(0, 20)),
		validation.Field(&r.ItemStrength, text),
		validation.Field(&r.ItemForm, text),
		validation.Field(&r.RouteAdministration, text),
		validation.Field(&r.PBSDVAAuthorityNumber, text),
		validation.Field(&r.PhoneApprovalAuthorityNumber, text),
		validation.Field(&r.ScheduleNumber, validation.RuneLength(0, 10)),
		validation.Field(&r.ReasonForPrescribing, validation.RuneLength(0, 1000)),
		validation.Field(&r.PatientInstructions, validation.RuneLength(0, 1000)),
		validation.Field(&r.DoctorNotes, validation.RuneLength(0, 1000)),
		validation.Field(&r.PharmacyName, text),
		validation.Field(&r.ControlledSubstanceReference, text),
		validation.Field(&r.SendToPharmacy, text),
		validation.Field(&r.PrescriberScriptNumber, text),
		validation.Field(&r.Delivery),
	)
}

func (r *PrescriptionCreateRequest) prescription(org, user, patient, urlBase string) *storage.Prescription {
	p := &storage.Prescription{
		OrgID: org, UserID: user, PatientID: patient, SCID: r.SCID, PrescriptionType: r.PrescriptionType,
		PrescriptionItem: r.PrescriptionItem, Delivery: storage.Delivery(r.Delivery),
	}
	if p.SCID == "" {
		p.SCID = storage.NewSCID()
	}
	p.URL = urlBase + "/scripts/" + p.SCID
	return p
}

func (a *App) createPrescription(c echo.Context) error {
	if err := pathUUID(c, "organization_id", "user_id", "patient_id"); err != nil {
		return err
	}
	var req PrescriptionCreateRequest
	if err := bindAdmin(c, &req); err != nil {
		return err
	}
	p := req.prescription(c.Param("organization_id"), c.Param("user_id"), c.Param("patient_id"), a.BaseURL())
	// The prescription.created event and its jobs commit with it; the store
	// wakes the queue.
	if err := a.store.CreatePrescription(c.Request().Context(), p); err != nil {
		return err
	}
	return a.created(c, "Prescription created", p)
}

// PrescriptionStatusRequest is the body of the operator's prescription
// PATCH: a move to Ceased, or to Error with a description.
type PrescriptionStatusRequest struct {
	Status string                     `json:"status"`
	Error  *storage.PrescriptionError `json:"error"`
}

// Validate checks the request.
func (r *PrescriptionStatusRequest) Validate() error {
	return validation.ValidateStruct(r,
		validation.Field(&r.Status, validation.Required, validation.In(storage.StatusCeased, storage.StatusError).Error("must be Ceased or Error")),
		validation.Field(&r.Error, validation.When(r.Status == storage.StatusError, validation.Required.Error("is required when status is Error"))),
	)
}

func (a *App) updatePrescription(c echo.Context) error {
	if err := pathUUID(c, "organization_id", "user_id", "patient_id"); err != nil {
		return err
	}
	var req PrescriptionStatusRequest
	if err := bindAdmin(c, &req); err != nil {
		return err
	}
	if req.Status == storage.StatusError && (req.Error == nil || req.Error.Description == "") {
		return errValidation(http.StatusUnprocessableEntity, []FieldError{{Field: "error.description", Message: "is required when status is Error", Code: codeValidation}})
	}
	p, err := a.store.UpdatePrescription(c.Request().Context(), c.Param("organization_id"), c.Param("user_id"), c.Param("patient_id"), c.Param("scid"),
		func(p *storage.Prescription) error {
			p.Status = req.Status
			p.Error = nil
			if req.Status == storage.StatusError {
				p.Error = req.Error
			}
			return nil
		})
	if err != nil {
		return err
	}
	return a.ok(c, "Prescription updated", p)
}
