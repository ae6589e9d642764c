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

// drugRules are the rules of spec 2.4 per member, built once: bulk create
// validates thousands of drugs per request. Lengths count characters.
type drugRules struct{ create, update []validation.Rule }

func requiredRules(max validation.Rule) drugRules {
	update := []validation.Rule{notNull, nonEmpty, max}
	return drugRules{create: append([]validation.Rule{requiredValue}, update...), update: update}
}

func optionalRules(max int) drugRules {
	r := []validation.Rule{validation.RuneLength(0, max)}
	return drugRules{create: r, update: r}
}

var (
	rulesGenericName = requiredRules(validation.RuneLength(0, 280))
	rulesStrength    = requiredRules(validation.RuneLength(0, 100))
	rulesForm        = requiredRules(validation.RuneLength(0, 50))
	rulesRoute       = requiredRules(validation.RuneLength(0, 50))
	rulesPoison      = requiredRules(validation.RuneLength(0, 2))
	rulesNumber      = requiredRules(flexLength(maxDrugNumberLen))
	rulesTradeName   = optionalRules(280)
	rulesBrand       = optionalRules(100)
	rulesProductID   = optionalRules(50)
	rulesDescription = optionalRules(280)
	rulesPatientInst = optionalRules(250)
	rulesDoctorInst  = optionalRules(50)
)

// validate checks the limits of spec 2.4, counting characters, not bytes.
// On create the seven members of spec 4.3 are required; on update a
// required member may be changed but not cleared. It validates member by
// member rather than with validation.ValidateStruct, whose reflection
// lookup of each field was most of bulk create's cost.
func (in *CustomDrugInput) validate(create bool) error {
	errs := validation.Errors{}
	check := func(name string, value any, r drugRules) {
		rules := r.update
		if create {
			rules = r.create
		}
		if err := validation.Validate(value, rules...); err != nil {
			errs[name] = err
		}
	}
	check("item_generic_name", in.ItemGenericName, rulesGenericName)
	check("item_strength", in.ItemStrength, rulesStrength)
	check("item_form", in.ItemForm, rulesForm)
	check("route_of_administration", in.RouteOfAdministration, rulesRoute)
	check("quantity", in.Quantity, rulesNumber)
	check("max_repeats", in.MaxRepeats, rulesNumber)
	check("poison_class", in.PoisonClass, rulesPoison)
	check("item_trade_name", in.ItemTradeName, rulesTradeName)
	check("brand_name", in.BrandName, rulesBrand)
	check("custom_product_id", in.CustomProductID, rulesProductID)
	check("description", in.Description, rulesDescription)
	check("patient_instructions", in.PatientInstructions, rulesPatientInst)
	check("doctor_instructions", in.DoctorInstructions, rulesDoctorInst)
	return errs.Filter()
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
