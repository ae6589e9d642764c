package app

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// The audit trail's page sizes.
const (
	auditPageDefault = 100
	auditPageMax     = 1000
)

// AuditCheckpoints is what GET /admin/v1/audit/checkpoints answers: every
// checkpoint, and the public key this server signs them with (absent when
// auditing is off). rxgate audit verify checks against a key it is given
// (pinned) rather than this one when it can.
type AuditCheckpoints struct {
	PublicKey   []byte                    `json:"public_key,omitempty"`
	Checkpoints []storage.AuditCheckpoint `json:"checkpoints"`
}

// auditLog is the store's audit trail, or a 404 when the backend has none.
func (a *App) auditLog() (storage.AuditLog, error) {
	l, ok := a.store.(storage.AuditLog)
	if !ok {
		return nil, errNotFound(slugNotFound, "This store keeps no audit trail.")
	}
	return l, nil
}

// listAudit answers GET /admin/v1/audit: one page of the entries, in
// chain order, that pass the filters patient_id, user_id, operator and the
// time range from (inclusive) to (exclusive), RFC 3339. What this request
// itself reads is audited too, like every operator action.
func (a *App) listAudit(c echo.Context) error {
	q, err := query(c)
	if err != nil {
		return err
	}
	f, page, err := auditListParams(q)
	if err != nil {
		return err
	}
	entries, info, err := a.findAudit(c.Request().Context(), f, page)
	if err != nil {
		return err
	}
	return a.page(c, "Audit entries retrieved", entries, info)
}

func (a *App) findAudit(ctx context.Context, f storage.AuditFilter, page storage.PageRequest) ([]storage.AuditEntry, storage.PageInfo, error) {
	l, err := a.auditLog()
	if err != nil {
		return nil, storage.PageInfo{}, err
	}
	if err := a.flushAudit(ctx); err != nil {
		return nil, storage.PageInfo{}, err
	}
	entries, info, err := l.ListAudit(ctx, f, page)
	if entries == nil {
		entries = []storage.AuditEntry{}
	}
	return entries, info, err
}

// auditListParams reads the audit list's query; bad filters are reported
// together.
func auditListParams(q url.Values) (storage.AuditFilter, storage.PageRequest, error) {
	f := storage.AuditFilter{PatientID: q.Get("patient_id"), UserID: q.Get("user_id"), Operator: q.Get("operator")}
	var fields []FieldError
	for _, t := range []struct {
		name string
		into *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		raw := q.Get(t.name)
		if raw == "" {
			continue
		}
		v, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			fields = append(fields, FieldError{Field: t.name, Message: "must be an RFC 3339 time", Code: codeValidation})
			continue
		}
		*t.into = v.UTC()
	}
	page, err := pageParams(q, auditPageDefault, auditPageMax)
	if err != nil {
		return f, page, err
	}
	if len(fields) > 0 {
		return f, page, errValidation(http.StatusBadRequest, fields)
	}
	return f, page, nil
}

// flushAudit appends the reads still buffered and signs a checkpoint of
// the head, so that whoever reads the trail sees it to this moment, and a
// verify that reads the checkpoints first covers every entry it reads.
func (a *App) flushAudit(ctx context.Context) error {
	if a.audit == nil {
		return nil
	}
	return a.audit.Flush(ctx)
}

// listAuditCheckpoints answers GET /admin/v1/audit/checkpoints, after
// signing a checkpoint of the head (flushAudit).
func (a *App) listAuditCheckpoints(c echo.Context) error {
	l, err := a.auditLog()
	if err != nil {
		return err
	}
	if err := a.flushAudit(c.Request().Context()); err != nil {
		return err
	}
	cps, err := l.ListAuditCheckpoints(c.Request().Context())
	if err != nil {
		return err
	}
	out := AuditCheckpoints{Checkpoints: cps}
	if out.Checkpoints == nil {
		out.Checkpoints = []storage.AuditCheckpoint{}
	}
	if a.audit != nil {
		out.PublicKey = a.audit.PublicKey()
	}
	return a.ok(c, "Audit checkpoints retrieved", out)
}
