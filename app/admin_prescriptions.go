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

// Rules of the prescription create, built once: a create is a hot path
// (validation.ValidateStruct's reflection lookup of each of the thirty
// fields had been an eighth of a create's CPU).
var (
	rxText     = []validation.Rule{validation.RuneLength(0, maxFreeText)}
	rxShort    = []validation.Rule{validation.RuneLength(0, 20)}
	rxLong     = []validation.Rule{validation.RuneLength(0, 1000)}
	rxType     = []validation.Rule{validation.In("ELECTRONIC").Error("must be ELECTRONIC")}
	rxSCID     = []validation.Rule{validation.Match(scidPattern).Error("must be 18 characters of 0-9 and A-Z")}
	rxItemName = []validation.Rule{validation.Required, validation.RuneLength(0, maxFreeText)}
	rxQuantity = []validation.Rule{validation.Required, validation.RuneLength(1, 20)}
	rxSchedule = []validation.Rule{validation.RuneLength(0, 10)}
	rxMethod   = []validation.Rule{validation.In("EMAIL", "SMS").Error("must be EMAIL or SMS")}
	rxTo       = []validation.Rule{validation.In("PHARMACY", "PATIENT").Error("must be PHARMACY or PATIENT")}
)

// check validates value with rules into errs under name.
func check(errs validation.Errors, name string, value any, rules []validation.Rule) {
	if err := validation.Validate(value, rules...); err != nil {
		errs[name] = err
	}
}

// Validate checks the delivery.
func (d DeliveryInput) Validate() error {
	errs := validation.Errors{}
	check(errs, "method", d.Method, rxMethod)
	check(errs, "recipient_type", d.RecipientType, rxTo)
	check(errs, "destination", d.Destination, rxText)
	return errs.Filter()
}

// Validate checks the request, member by member.
func (r *PrescriptionCreateRequest) Validate() error {
	errs := validation.Errors{}
	check(errs, "prescription_type", r.PrescriptionType, rxType)
	check(errs, "scid", r.SCID, rxSCID)
	check(errs, "item_name", r.ItemName, rxItemName)
	check(errs, "quantity", r.Quantity, rxQuantity)
	check(errs, "number_of_repeats_authorised", r.NumberOfRepeatsAuthorised, rxShort)
	check(errs, "repeat_intervals", r.RepeatIntervals, rxShort)
	check(errs, "pbs_code", r.PBSCode, rxShort)
	for _, m := range []struct {
		name  string
		value string
	}{
		{"item_strength", r.ItemStrength}, {"item_form", r.ItemForm}, {"route_administration", r.RouteAdministration},
		{"pbsdva_authority_number", r.PBSDVAAuthorityNumber}, {"phone_approval_authority_number", r.PhoneApprovalAuthorityNumber},
		{"pharmacy_name", r.PharmacyName}, {"controlled_substance_reference", r.ControlledSubstanceReference},
		{"send_to_pharmacy", r.SendToPharmacy}, {"prescriber_script_number", r.PrescriberScriptNumber},
	} {
		check(errs, m.name, m.value, rxText)
	}
	check(errs, "schedule_number", r.ScheduleNumber, rxSchedule)
	check(errs, "reason_for_prescribing", r.ReasonForPrescribing, rxLong)
	check(errs, "patient_instructions", r.PatientInstructions, rxLong)
	check(errs, "doctor_notes", r.DoctorNotes, rxLong)
	if err := r.Delivery.Validate(); err != nil {
		errs["delivery"] = err
	}
	return errs.Filter()
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
	a.metrics.observeEvent(p.EventStatus)
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
