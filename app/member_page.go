package app

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// The prescription page's member and page in one read (issue 28). On a
// storage.MemberPageReader store (PostgreSQL), partnerAuth on the
// prescription page reads the request's member (the organization and the
// token's user, as getMember does) and the page it asks for together, in
// one round trip where they took two; the member is checked exactly as on
// every other route, by partnerAuth, requireScope and requireUserAccess,
// before listPrescriptions sends any of the page. The member is read on
// every request, so a disable or a secret rotation on any replica is
// refused at once, as before. A request the page cannot be read for as it
// stands (not a GET or HEAD, a malformed path or page request) reads the
// member alone and gets the error it always got from the handler.

const ctxMemberPage = "rxgate.memberPage"

// auditedPartnerAuthPage is auditedPartnerAuth for the prescription page.
func (a *App) auditedPartnerAuthPage(next echo.HandlerFunc) echo.HandlerFunc {
	if a.pages == nil {
		return a.auditedPartnerAuth(next)
	}
	return a.auditMiddleware(storage.AuditActorPartner)(a.partnerAuthWith(next, a.getMemberPage))
}

// getMemberPage is getMember, with the page read beside it and kept for
// listPrescriptions (memberPageOf), when the request allows.
func (a *App) getMemberPage(c echo.Context, orgID, userID string) (*storage.Organization, *storage.User, error) {
	r := c.Request()
	if r.Method != http.MethodGet && r.Method != http.MethodHead || pathUUID(c, "user_id", "patient_id") != nil {
		return a.getMember(c, orgID, userID)
	}
	req, err := pageRequest(c, prescriptionPageDefault, prescriptionPageMax)
	if err != nil {
		return a.getMember(c, orgID, userID)
	}
	buf := getBuffer()
	mp, err := a.pages.GetMemberPrescriptionsJSON(r.Context(), orgID, userID, c.Param("user_id"), c.Param("patient_id"), req, (*buf)[:0])
	if err != nil {
		putBuffer(buf)
		return nil, nil, err
	}
	*buf = mp.Items
	c.Set(ctxMemberPage, &memberPage{MemberPage: mp, buf: buf})
	return mp.Org, mp.User, nil
}

// memberPage is a page getMemberPage read, in a pooled buffer.
type memberPage struct {
	*storage.MemberPage
	buf *[]byte
}

// memberPageOf takes the page getMemberPage read for c, if any; the caller
// puts its buffer back (putBuffer) once the answer is written.
func memberPageOf(c echo.Context) *memberPage {
	mp, _ := c.Get(ctxMemberPage).(*memberPage)
	if mp != nil {
		c.Set(ctxMemberPage, nil)
	}
	return mp
}
