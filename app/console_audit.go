package app

import (
	"net/http"
	"net/url"
	"time"

	"github.com/rxgate/rxgate/storage"
)

// auditData is the console's audit page.
type auditData struct {
	Entries  []storage.AuditEntry
	Page     storage.PageInfo
	Filter   storage.AuditFilter
	From, To string
	NextURL  string
}

// auditPage lists the audit trail with the operator API's filters
// (auditListParams); admins only, like GET /admin/v1/audit, and audited
// like every console page.
func (a *App) auditPage(cc *consoleContext) error {
	q, err := cc.query()
	if err != nil {
		return err
	}
	f, page, err := auditListParams(q)
	if err != nil {
		return err
	}
	entries, info, err := a.findAudit(cc.Request().Context(), f, page)
	if err != nil {
		return err
	}
	d := auditData{Entries: entries, Page: info, Filter: f}
	if !f.From.IsZero() {
		d.From = f.From.Format(time.RFC3339Nano)
	}
	if !f.To.IsZero() {
		d.To = f.To.Format(time.RFC3339Nano)
	}
	if info.HasNext {
		next := url.Values{"lastKey": {info.LastKey}}
		for _, k := range []string{"patient_id", "user_id", "operator", "from", "to", "limit"} {
			if v := q.Get(k); v != "" {
				next.Set(k, v)
			}
		}
		d.NextURL = "?" + next.Encode()
	}
	return cc.render(http.StatusOK, "audit", consoleView{Title: "Audit trail", Section: "audit", Data: d})
}
