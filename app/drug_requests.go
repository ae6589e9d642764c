package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/invopop/validation"

	"github.com/rxgate/rxgate/storage"
)

// flexString is a member that accepts a JSON string or number and keeps it
// as a string (quantity and max_repeats, spec 2.4). A number keeps its JSON
// spelling ("2.50" stays "2.50").
type flexString string

// UnmarshalJSON accepts a string or a number.
func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return typeError{"must be a string or a number"}
		}
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return typeError{"must be a string or a number"}
	}
	*f = flexString(n.String())
	return nil
}

// CustomDrugInput is the body of a custom drug create or update (spec 2.4):
// each member absent, null or a value. custom_drug_id is assigned by the
// service and is not accepted.
type CustomDrugInput struct {
	ItemGenericName       Optional[string]     `json:"item_generic_name"`
	ItemStrength          Optional[string]     `json:"item_strength"`
	ItemForm              Optional[string]     `json:"item_form"`
	RouteOfAdministration Optional[string]     `json:"route_of_administration"`
	Quantity              Optional[flexString] `json:"quantity"`
	MaxRepeats            Optional[flexString] `json:"max_repeats"`
	PoisonClass           Optional[string]     `json:"poison_class"`
	ItemTradeName         Optional[string]     `json:"item_trade_name"`
	BrandName             Optional[string]     `json:"brand_name"`
	CustomProductID       Optional[string]     `json:"custom_product_id"`
	Description           Optional[string]     `json:"description"`
	PatientInstructions   Optional[string]     `json:"patient_instructions"`
	DoctorInstructions    Optional[string]     `json:"doctor_instructions"`
}

// maxDrugNumberLen bounds quantity and max_repeats, for which the spec
// gives no length.
const maxDrugNumberLen = 20

// requiredValue refuses an absent, null or blank member.
var requiredValue = validation.By(func(v any) error {
	switch o := v.(type) {
	case Optional[string]:
		if o.present() && strings.TrimSpace(o.V) != "" {
			return nil
		}
	case Optional[flexString]:
		if o.present() && strings.TrimSpace(string(o.V)) != "" {
			return nil
		}
	}
	return errors.New("is required")
})

// flexLength checks a flexString's length in characters.
func flexLength(max int) validation.Rule {
	return validation.By(func(v any) error {
		if o, ok := v.(Optional[flexString]); ok && o.present() {
			return validation.Validate(string(o.V), validation.RuneLength(0, max))
		}
		return nil
	})
}

// validate checks the limits of spec 2.4, counting characters, not bytes.
// On create the seven members of spec 4.3 are required; on update a
// required member may be changed but not cleared.
func (in *CustomDrugInput) validate(create bool) error {
	req := func(max int) []validation.Rule {
		rules := []validation.Rule{notNull, nonEmpty, validation.RuneLength(0, max)}
		if create {
			rules = append([]validation.Rule{requiredValue}, rules...)
		}
		return rules
	}
	num := []validation.Rule{notNull, nonEmpty, flexLength(maxDrugNumberLen)}
	if create {
		num = append([]validation.Rule{requiredValue}, num...)
	}
	return validation.ValidateStruct(in,
		validation.Field(&in.ItemGenericName, req(280)...),
		validation.Field(&in.ItemStrength, req(100)...),
		validation.Field(&in.ItemForm, req(50)...),
		validation.Field(&in.RouteOfAdministration, req(50)...),
		validation.Field(&in.Quantity, num...),
		validation.Field(&in.MaxRepeats, num...),
		validation.Field(&in.PoisonClass, req(2)...),
		validation.Field(&in.ItemTradeName, validation.RuneLength(0, 280)),
		validation.Field(&in.BrandName, validation.RuneLength(0, 100)),
		validation.Field(&in.CustomProductID, validation.RuneLength(0, 50)),
		validation.Field(&in.Description, validation.RuneLength(0, 280)),
		validation.Field(&in.PatientInstructions, validation.RuneLength(0, 250)),
		validation.Field(&in.DoctorInstructions, validation.RuneLength(0, 50)),
	)
}

// setString applies a supplied member to a string: null clears it.
func setString(o Optional[string], dst *string) {
	if o.Set {
		*dst = o.V
	}
}

func setFlex(o Optional[flexString], dst *string) {
	if o.Set {
		*dst = string(o.V)
	}
}

// patch applies the supplied members to d.
func (in *CustomDrugInput) patch(d *storage.CustomDrug) {
	setString(in.ItemGenericName, &d.ItemGenericName)
	setString(in.ItemStrength, &d.ItemStrength)
	setString(in.ItemForm, &d.ItemForm)
	setString(in.RouteOfAdministration, &d.RouteOfAdministration)
	setFlex(in.Quantity, &d.Quantity)
	setFlex(in.MaxRepeats, &d.MaxRepeats)
	setString(in.PoisonClass, &d.PoisonClass)
	setString(in.ItemTradeName, &d.ItemTradeName)
	setString(in.BrandName, &d.BrandName)
	setString(in.CustomProductID, &d.CustomProductID)
	setString(in.Description, &d.Description)
	setString(in.PatientInstructions, &d.PatientInstructions)
	setString(in.DoctorInstructions, &d.DoctorInstructions)
}

// decodeDrug decodes and validates one custom drug object, returning every
// problem as field errors.
func decodeDrug(raw []byte, create bool) (*CustomDrugInput, []FieldError, error) {
	var in CustomDrugInput
	fields, err := decodeObject(raw, &in)
	if err != nil {
		return nil, nil, err
	}
	if verr := in.validate(create); verr != nil {
		var internal validation.InternalError
		if errors.As(verr, &internal) {
			return nil, nil, verr
		}
		fields = append(fields, fieldErrors(verr)...)
	}
	return &in, dedupe(fields), nil
}
