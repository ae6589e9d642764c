package app

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// Bulk create limits (spec 4.4 and 8).
const (
	// maxListedFailures is how many failures bulk create lists.
	maxListedFailures = 50
)

var errDrugNotFound = errNotFound(slugNotFound, "The custom drug does not exist for this user.")

// errDrugUser answers a custom drug list or create for a user that does not
// exist in the organization: 401, since spec 4.2 and 4.3 list no 404 and
// custom drug operations answer every access problem with 401.
var errDrugUser = errUnauthorized("The user does not exist in this organization.")

// drugValidation is the 400 of custom drug operations (spec 7.1).
func drugValidation(fields []FieldError) *Error { return errValidation(http.StatusBadRequest, fields) }

// listCustomDrugs is GET .../users/{user_id}/custom-drugs (spec 4.2): the
// organization's drugs and the user's own.
func (a *App) listCustomDrugs(c echo.Context) error {
	if pathUUID(c, "user_id") != nil {
		return errDrugUser
	}
	buf := getBuffer()
	defer putBuffer(buf)
	drugs, n, err := a.store.ListCustomDrugsJSON(c.Request().Context(), callerOf(c).org.ID, c.Param("user_id"), (*buf)[:0])
	*buf = drugs
	if errors.Is(err, storage.ErrNotFound) {
		return errDrugUser.withCause(err)
	}
	if err != nil {
		return err
	}
	return a.respondRaw(c, http.StatusOK, fmt.Sprintf("Retrieved %d custom drugs", n), nil, drugs)
}

// createCustomDrug is POST .../users/{user_id}/custom-drugs (spec 4.3): one
// user-level drug, 201.
func (a *App) createCustomDrug(c echo.Context) error {
	if pathUUID(c, "user_id") != nil {
		return errDrugUser
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if body == nil {
		return errBadRequest("The request body is required.")
	}
	in, fields, err := decodeDrug(body, true)
	if err != nil {
		return err
	}
	if len(fields) > 0 {
		return drugValidation(fields)
	}
	d := []storage.CustomDrug{{OrgID: callerOf(c).org.ID, UserID: c.Param("user_id")}}
	in.patch(&d[0])
	err = a.store.CreateCustomDrugs(c.Request().Context(), d)
	if errors.Is(err, storage.ErrNotFound) {
		return errDrugUser.withCause(err)
	}
	if err != nil {
		return err
	}
	return a.created(c, "Custom drug created successfully", d[0])
}

// updateCustomDrug is PUT .../custom-drugs/{drug_id} (spec 4.5): a partial
// update of the user's own drug.
func (a *App) updateCustomDrug(c echo.Context) error {
	if pathUUID(c, "user_id", "drug_id") != nil {
		return errDrugNotFound
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if body == nil {
		body = []byte("{}")
	}
	in, fields, err := decodeDrug(body, false)
	if err != nil {
		return err
	}
	if len(fields) > 0 {
		return drugValidation(fields)
	}
	d, err := a.store.UpdateCustomDrug(c.Request().Context(), callerOf(c).org.ID, c.Param("user_id"), c.Param("drug_id"),
		func(d *storage.CustomDrug) error { in.patch(d); return nil })
	if errors.Is(err, storage.ErrNotFound) {
		return errDrugNotFound.withCause(err)
	}
	if err != nil {
		return err
	}
	return a.ok(c, "Custom drug updated successfully", d)
}

// deleteCustomDrug is DELETE .../custom-drugs/{drug_id} (named in spec 4.10).
func (a *App) deleteCustomDrug(c echo.Context) error {
	if pathUUID(c, "user_id", "drug_id") != nil {
		return errDrugNotFound
	}
	err := a.store.DeleteCustomDrug(c.Request().Context(), callerOf(c).org.ID, c.Param("user_id"), c.Param("drug_id"))
	if errors.Is(err, storage.ErrNotFound) {
		return errDrugNotFound.withCause(err)
	}
	if err != nil {
		return err
	}
	return a.ok(c, "Custom drug deleted successfully", map[string]string{"custom_drug_id": c.Param("drug_id")})
}

// BulkFailure is one failed item of a bulk create.
type BulkFailure struct {
	Index int    `json:"index"`
	Error string `json:"error"`
}

// BulkResult is the data of a bulk create (spec 4.4).
type BulkResult struct {
	Total        int           `json:"total"`
	SuccessCount int           `json:"successCount"`
	FailureCount int           `json:"failureCount"`
	Failures     []BulkFailure `json:"failures"`
}

var errBulkNotArray = errBadRequest("The request body must be a non-empty JSON array of custom drugs.")

// errBulkTooMany refuses a bulk create of more than max drugs
// (http.max_bulk_drugs; 2,000 drugs with every member at its maximum
// length, about 1.9 KB each, fit in the default 4 MiB body limit, and
// larger bodies are refused with 413 first).
func errBulkTooMany(max int) *Error {
	return errBadRequest("At most " + strconv.Itoa(max) + " custom drugs may be created in one request.")
}

// bulkItems returns the elements of a bulk create body, a non-empty JSON
// array of at most max elements. The elements are counted as they
// are read and reading stops at the first one over the cap: decoding a
// whole array of millions of tiny elements first cost seconds of CPU and
// hundreds of megabytes. Checking that the body is JSON at all allocates
// nothing.
func bulkItems(body []byte, max int) ([]json.RawMessage, error) {
	if !json.Valid(body) {
		return nil, errMalformedJSON
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, errBulkNotArray
	}
	var items []json.RawMessage
	for dec.More() {
		if len(items) == max {
			return nil, errBulkTooMany(max)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errMalformedJSON
		}
		items = append(items, raw)
	}
	if len(items) == 0 {
		return nil, errBulkNotArray
	}
	return items, nil
}

// bulkCreateCustomDrugs is POST /v1/organizations/{id}/custom-drugs (spec
// 4.4): every item validated and stored on its own, the valid ones written
// in batches; 200 when any succeeded, 400 when all failed.
func (a *App) bulkCreateCustomDrugs(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	if body == nil {
		return errBadRequest("The request body must be a non-empty JSON array of custom drugs.")
	}
	items, err := bulkItems(body, a.cfg.HTTP.MaxBulkDrugs)
	if err != nil {
		return err
	}
	orgID := callerOf(c).org.ID
	res := BulkResult{Total: len(items), Failures: []BulkFailure{}}
	drugs := make([]storage.CustomDrug, 0, len(items))
	for i, raw := range items {
		in, fields, err := decodeDrug(raw, true)
		if err != nil {
			var apiErr *Error
			if !errors.As(err, &apiErr) {
				return err
			}
			fields = []FieldError{{Field: "item", Message: "must be a JSON object"}}
		}
		if len(fields) > 0 {
			res.FailureCount++
			if len(res.Failures) < maxListedFailures {
				res.Failures = append(res.Failures, BulkFailure{Index: i + 1, Error: describe(fields)})
			}
			continue
		}
		d := storage.CustomDrug{OrgID: orgID}
		in.patch(&d)
		drugs = append(drugs, d)
	}
	if len(drugs) > 0 {
		if err := a.store.CreateCustomDrugs(c.Request().Context(), drugs); err != nil {
			return err
		}
	}
	res.SuccessCount = len(drugs)
	if res.SuccessCount == 0 {
		// The error envelope, carrying the summary in data as spec 7.3 says
		// ("bulk create reports per-item errors in data.failures").
		return &Error{Status: http.StatusBadRequest, Code: codeValidation, Slug: slugValidation, Title: titleValidation,
			Detail: fmt.Sprintf("All %d custom drugs failed validation; see data.failures.", res.Total), Data: res}
	}
	return a.ok(c, fmt.Sprintf("Created %d of %d custom drugs", res.SuccessCount, res.Total), res)
}

// describe joins field errors into one line: "quantity: is required; ...".
func describe(fields []FieldError) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return strings.Join(parts, "; ")
}
