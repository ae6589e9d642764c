package app

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// Page sizes (spec 8).
const (
	prescriptionPageDefault = 20
	prescriptionPageMax     = 50
)

// deprecationHeader announces the deprecated top-level prescriber member of
// the prescription list (spec 9.3) as RFC 9745 does: deprecated since
// 2025-01-01T00:00:00Z.
const deprecationHeader = "@1735689600"

// pageRequest reads limit (default def, 1..max) and lastKey from the query.
// A limit that is not an integer in range, or a malformed query, is a 400
// validation error.
func pageRequest(c echo.Context, def, max int) (storage.PageRequest, error) {
	raw := c.Request().URL.RawQuery
	if !strings.ContainsAny(raw, "%+;") {
		// Nothing escaped: parseQuery would decode every name and value
		// to itself and refuse none, so the two parameters are read in
		// place, without building url.Values (BenchmarkPrescriptionPage,
		// alloc profile). TestPageRequestFastPath holds the two equal.
		var cursor, limit string
		var hasCursor, hasLimit bool
		for raw != "" {
			var pair string
			pair, raw, _ = strings.Cut(raw, "&")
			switch name, value, _ := strings.Cut(pair, "="); name {
			case "lastKey":
				if !hasCursor {
					cursor, hasCursor = value, true
				}
			case "limit":
				if !hasLimit {
					limit, hasLimit = value, true
				}
			}
		}
		return pageOf(cursor, limit, hasLimit, def, max)
	}
	q, err := query(c)
	if err != nil {
		return storage.PageRequest{}, err
	}
	return pageParams(q, def, max)
}

// pageParams is pageRequest on a parsed query.
func pageParams(q url.Values, def, max int) (storage.PageRequest, error) {
	var limit string
	values, hasLimit := q["limit"]
	if hasLimit {
		limit = values[0]
	}
	return pageOf(q.Get("lastKey"), limit, hasLimit, def, max)
}

// pageOf is the page asked for by the first lastKey and limit parameters.
func pageOf(cursor, limit string, hasLimit bool, def, max int) (storage.PageRequest, error) {
	req := storage.PageRequest{Limit: def, Cursor: cursor}
	if hasLimit {
		n, err := strconv.Atoi(limit)
		if err != nil || !digitsPattern.MatchString(limit) || n < 1 || n > max {
			return req, errValidation(http.StatusBadRequest, []FieldError{{
				Field: "limit", Message: "must be an integer from 1 to " + strconv.Itoa(max), Code: codeValidation,
			}})
		}
		req.Limit = n
	}
	return req, nil
}

// PrescriptionPatient is the patient member of the prescription list.
type PrescriptionPatient struct {
	GivenName        string `json:"given_name"`
	FamilyName       string `json:"family_name"`
	DateOfBirth      string `json:"date_of_birth"`
	Sex              string `json:"sex"`
	PatientID        string `json:"patient_id"`
	PartnerPatientID string `json:"partner_patient_id"`
}

// ListPrescriber is the deprecated top-level prescriber member.
type ListPrescriber struct {
	GivenName  string `json:"given_name"`
	FamilyName string `json:"family_name"`
	UserID     string `json:"user_id"`
}

// PrescriptionList is the data of GET .../prescriptions (spec 4.6).
type PrescriptionList struct {
	Patient       PrescriptionPatient    `json:"patient"`
	Prescriber    ListPrescriber         `json:"prescriber"`
	Prescriptions []storage.Prescription `json:"prescriptions"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// dateTime renders a YYYY-MM-DD date as the date-time string the
// prescription list uses for date_of_birth.
func dateTime(date string) string {
	t, err := time.Parse(dateLayout, date)
	if err != nil {
		return date
	}
	return t.Format("2006-01-02T15:04:05.000Z")
}

// listPrescriptions is GET .../patients/{patient_id}/prescriptions (spec
// 4.6): newest first, cursor paginated. It is the hottest read, so the
// stored prescriptions are spliced into the response as they are, without
// decoding and re-encoding them.
func (a *App) listPrescriptions(c echo.Context) error {
	if pathUUID(c, "user_id", "patient_id") != nil {
		return errPatientNotFound
	}
	req, err := pageRequest(c, prescriptionPageDefault, prescriptionPageMax)
	if err != nil {
		return err
	}
	cl := callerOf(c)
	done, known, remember := a.conditionalFirstPage(c, a.changes, cl.org.ID, req)
	if done {
		return c.NoContent(http.StatusNotModified)
	}
	if known != nil {
		c.Response().Header()["Deprecation"] = deprecationValue
		return a.respondRaw(c, http.StatusOK, prescriptionsMessage, pagination(known.info), known.data)
	}
	ctx := c.Request().Context()
	var p *storage.Patient
	var items []byte
	var info storage.PageInfo
	if mp := memberPageOf(c); mp != nil {
		// Read with the member (member_page.go).
		defer putBuffer(mp.buf)
		p, items, info, err = mp.Patient, mp.Items, mp.Info, mp.PageErr
	} else {
		buf := getBuffer()
		defer putBuffer(buf)
		p, items, info, err = a.store.ListPrescriptionsJSON(ctx, cl.org.ID, c.Param("user_id"), c.Param("patient_id"), req, (*buf)[:0])
		*buf = items
	}
	if errors.Is(err, storage.ErrNotFound) {
		return errPatientNotFound.withCause(err)
	}
	if err != nil {
		return err
	}
	user := cl.user
	if user.ID != p.UserID {
		if user, err = a.store.GetUser(ctx, cl.org.ID, p.UserID); err != nil {
			return err
		}
	}
	head, err := json.Marshal(struct {
		Patient    PrescriptionPatient `json:"patient"`
		Prescriber ListPrescriber      `json:"prescriber"`
	}{
		Patient: PrescriptionPatient{
			GivenName: deref(p.GivenName), FamilyName: deref(p.FamilyName), DateOfBirth: dateTime(deref(p.DateOfBirth)),
			Sex: deref(p.Sex), PatientID: p.ID, PartnerPatientID: p.PartnerPatientID,
		},
		Prescriber: ListPrescriber{GivenName: user.GivenName, FamilyName: user.FamilyName, UserID: user.ID},
	})
	if err != nil {
		return err
	}
	c.Response().Header()["Deprecation"] = deprecationValue
	// data is head without its closing brace, then "prescriptions": items.
	data := [][]byte{head[:len(head)-1], prescriptionsMember, items, closingBrace}
	if err := a.respondRaw(c, http.StatusOK, prescriptionsMessage, pagination(info), data...); err != nil {
		return err
	}
	remember(info, data...)
	return nil
}

// The constant parts of a prescription page.
var (
	prescriptionsMember = []byte(`,"prescriptions":`)
	closingBrace        = []byte("}")
)

const prescriptionsMessage = "Prescriptions retrieved successfully"
