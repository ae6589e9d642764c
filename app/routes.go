package app

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/storage"
)

// partnerRoutes is the partner API's route table (spec section 4), under
// http.base_path, plus health and the built-in issuer's JWKS at the root.
func (a *App) partnerRoutes(e *echo.Echo) {
	a.healthRoutes(e)
	base := e.Group(a.cfg.HTTP.BasePath)
	base.GET("/v1/openapi.json", a.partnerOpenAPI()) // no auth (issue 6)
	base.GET("/docs", a.partnerDocs())               // no auth: the reference, from that document
	if a.issuer != nil {
		e.GET("/.well-known/jwks.json", a.jwks)
		base.POST("/v1/token", a.issueToken)
	}

	// Every route below runs partnerAuth first (see authedGroup).
	authed := a.auditedPartnerAuth
	org := authedGroup{base.Group("/v1/organizations/:organization_id"), authed}
	org.GET("/validate", a.validateOrganization)

	// Missing scopes are 403, except on custom drug operations, where they
	// are 401 "Insufficient scope" (spec 5.4), as is acting for another
	// user or, on bulk create, not being an owner or admin (spec 4.4).
	const forbidden, unauthorized = http.StatusForbidden, http.StatusUnauthorized
	readUsers := requireScope(forbidden, auth.ScopeReadUsers, auth.ScopeReadUsersAlias)
	org.GET("/users", a.listUsers, readUsers)
	org.POST("/custom-drugs", a.bulkCreateCustomDrugs, requireScope(unauthorized, auth.ScopeCreateCustomDrug), requireManager)

	user := authedGroup{base.Group("/v1/organizations/:organization_id/users/:user_id"), authed}
	self := requireUserAccess(forbidden)
	user.GET("", a.getUser, readUsers, self)
	user.PUT("/disable", a.disableUser, requireScope(forbidden, auth.ScopeUpdateUser, auth.ScopeDeleteUser), self)
	user.PUT("/enable", a.enableUser, requireScope(forbidden, auth.ScopeUpdateUser), self)
	user.POST("/patients", a.createPatient, requireScope(forbidden, auth.ScopeCreatePatient), self)
	user.PUT("/patients/:patient_id", a.updatePatient, requireScope(forbidden, auth.ScopeUpdatePatient), self)
	// The prescription page reads its member with the page (member_page.go).
	page := authedGroup{user.g, a.auditedPartnerAuthPage}
	page.GET("/patients/:patient_id/prescriptions", a.listPrescriptions, requireScope(forbidden, auth.ScopeReadPrescriptions), self)

	drugSelf := requireUserAccess(unauthorized)
	user.GET("/custom-drugs", a.listCustomDrugs, requireScope(unauthorized, auth.ScopeReadCustomDrug), drugSelf)
	user.POST("/custom-drugs", a.createCustomDrug, requireScope(unauthorized, auth.ScopeCreateCustomDrug), drugSelf)
	user.PUT("/custom-drugs/:drug_id", a.updateCustomDrug, requireScope(unauthorized, auth.ScopeUpdateCustomDrug), drugSelf)
	user.DELETE("/custom-drugs/:drug_id", a.deleteCustomDrug, requireScope(unauthorized, auth.ScopeUpdateCustomDrug), drugSelf)
}

// adminRoutes is the operator API's route table, and the console's
// (consoleRoutes) on the same listener.
func (a *App) adminRoutes(e *echo.Echo) {
	// Every answer of this listener, the console's included, first checks
	// the Host (DNS rebinding, issue 27).
	e.Use(a.adminHostMiddleware())
	// Every operator action, the console's included, is audited (audit.go).
	e.Use(a.auditMiddleware(storage.AuditActorOperator))
	a.healthRoutes(e)
	e.GET("/admin/v1/openapi.json", a.adminOpenAPI()) // no auth (issue 6)
	e.GET("/metrics", echo.WrapHandler(a.metrics.handler()), a.operatorAuth(permMetrics))
	// Every route below runs operatorAuth with its permission first: the
	// roles matrix (roleMatrix) says which roles hold it.
	g := e.Group("/admin/v1")
	op := func(method, path string, p permission, h echo.HandlerFunc) {
		g.Add(method, path, h, a.operatorAuth(p))
	}
	const get, post, patch, del = http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete
	op(post, "/partners", permPartnersWrite, a.createPartner)
	op(get, "/partners", permPartnersRead, a.listPartners)
	op(post, "/partners/:partner_id/rotate-secret", permPartnersWrite, a.rotatePartnerSecret)
	op(post, "/organizations", permOrganizationsWrite, a.createOrganization)
	op(get, "/organizations", permOrganizationsRead, a.listOrganizations)
	op(get, "/organizations/:organization_id", permOrganizationsRead, a.getOrganization)
	op(get, "/organizations/:organization_id/users", permUsersRead, a.listOrganizationUsers)
	op(post, "/organizations/:organization_id/rotate-secret", permOrganizationsWrite, a.rotateOrganizationSecret)
	op(post, "/organizations/:organization_id/users", permUsersWrite, a.createUser)
	op(get, "/organizations/:organization_id/users/:user_id", permUsersRead, a.getUserAdmin)
	op(post, "/organizations/:organization_id/users/:user_id/patients", permPatients, a.createPatientAdmin)
	op(get, "/organizations/:organization_id/users/:user_id/patients/:patient_id", permPatients, a.getPatientAdmin)
	op(post, "/organizations/:organization_id/users/:user_id/patients/:patient_id/prescriptions", permPatients, a.createPrescription)
	op(patch, "/organizations/:organization_id/users/:user_id/patients/:patient_id/prescriptions/:scid", permPatients, a.updatePrescription)
	op(post, "/tokens", permTokens, a.createToken)
	op(post, "/webhook-endpoints", permEndpointsWrite, a.createWebhookEndpoint)
	op(get, "/webhook-endpoints", permEndpointsRead, a.listWebhookEndpoints)
	op(get, "/webhook-endpoints/:endpoint_id", permEndpointsRead, a.getWebhookEndpoint)
	op(patch, "/webhook-endpoints/:endpoint_id", permEndpointsWrite, a.updateWebhookEndpoint)
	op(del, "/webhook-endpoints/:endpoint_id", permEndpointsWrite, a.deleteWebhookEndpoint)
	op(post, "/webhook-endpoints/:endpoint_id/rotate-secret", permEndpointsRotate, a.rotateWebhookSecret)
	op(post, "/webhook-endpoints/:endpoint_id/diagnose", permEndpointsDiagnose, a.diagnoseWebhookSignature)
	op(post, "/sandbox/clock", permSandboxClock, a.advanceSandboxClock)
	op(post, "/webhook-endpoints/:endpoint_id/test", permEndpointsTest, a.testWebhookEndpoint)
	op(post, "/webhook-endpoints/:endpoint_id/enable", permEndpointsRecover, a.enableWebhookEndpoint)
	op(post, "/webhook-endpoints/:endpoint_id/recover", permEndpointsRecover, a.recoverWebhookEndpoint)
	op(get, "/events", permEventsRead, a.listEvents)
	op(get, "/events/:event_id", permEventsRead, a.getEvent)
	op(post, "/events/:event_id/replay", permEventsReplay, a.replayEvent)
	op(get, "/backup", permBackup, a.getBackup)
	op(get, "/overview", permOverview, a.getOverview)
	op(post, "/operator-keys", permOperatorKeys, a.createOperatorKey)
	op(get, "/operator-keys", permOperatorKeys, a.listOperatorKeys)
	op(post, "/operator-keys/:key_id/revoke", permOperatorKeys, a.revokeOperatorKey)
	op(get, "/audit", permAudit, a.listAudit)
	op(get, "/audit/checkpoints", permAudit, a.listAuditCheckpoints)
	a.consoleRoutes(e)
}

// consoleRoutes is the console's route table, on the operator listener.
// Public pages (consolePublic) need no session; the others (consolePage)
// redirect a GET to sign-in without one and check a POST's origin and
// CSRF token. Every GET also answers HEAD.
func (a *App) consoleRoutes(e *echo.Echo) {
	get := func(path string, h echo.HandlerFunc) {
		e.GET(path, h)
		e.HEAD(path, h)
	}
	get("/console", func(c echo.Context) error { return c.Redirect(http.StatusMovedPermanently, "/console/") })
	get("/console/static/console.css", consoleStatic("console.css", "text/css; charset=utf-8"))
	get("/console/static/favicon.svg", consoleStatic("favicon.svg", "image/svg+xml"))
	get("/console/sign-in", a.consolePublic(a.signInPage))
	e.POST("/console/sign-in", a.consolePublic(a.signIn))
	e.GET("/console/sign-in/:token", a.consolePublic(a.signInLink))
	e.HEAD("/console/sign-in/:token", a.consolePublic(a.signInLink)) // answered without spending the link
	// Sign-out needs no live session: it always ends the cookie.
	e.POST("/console/sign-out", a.consolePublic(a.signOut))

	// Each page names the permission it needs, as the operator API's
	// routes do (roleMatrix); consolePage checks it.
	page := func(method, path string, p permission, h consoleHandler) {
		e.Add(method, path, a.consolePage(p, h))
		if method == http.MethodGet {
			e.Add(http.MethodHead, path, a.consolePage(p, h))
		}
	}
	page(http.MethodGet, "/console/", permSignedIn, a.overviewPage) // a role without permOverview is sent on
	page(http.MethodGet, "/console/organizations", permOrganizationsRead, a.organizationsPage)
	page(http.MethodGet, "/console/organizations/:organization_id", permOrganizationsRead, a.organizationPage)
	page(http.MethodGet, "/console/endpoints", permEndpointsRead, a.endpointsPage)
	page(http.MethodPost, "/console/endpoints", permEndpointsWrite, a.registerEndpointForm)
	page(http.MethodPost, "/console/endpoints/:endpoint_id/rotate-secret", permEndpointsRotate, a.rotateEndpointForm)
	page(http.MethodPost, "/console/endpoints/:endpoint_id/test", permEndpointsTest, a.testEndpointForm)
	page(http.MethodPost, "/console/endpoints/:endpoint_id/enable", permEndpointsRecover, a.enableEndpointForm)
	page(http.MethodPost, "/console/endpoints/:endpoint_id/recover", permEndpointsRecover, a.recoverEndpointForm)
	page(http.MethodGet, "/console/endpoints/:endpoint_id/diagnose", permEndpointsDiagnose, a.diagnosePage)
	page(http.MethodPost, "/console/endpoints/:endpoint_id/diagnose", permEndpointsDiagnose, a.diagnoseForm)
	page(http.MethodGet, "/console/endpoints/secret", permEndpointsRotate, a.secretPage)
	page(http.MethodGet, "/console/endpoints/:endpoint_id/delete", permEndpointsWrite, a.deleteEndpointPage)
	page(http.MethodPost, "/console/endpoints/:endpoint_id/delete", permEndpointsWrite, a.deleteEndpointForm)
	page(http.MethodGet, "/console/events", permEventsRead, a.eventsPage)
	page(http.MethodGet, "/console/events/:event_id", permEventsRead, a.eventPage)
	page(http.MethodPost, "/console/events/:event_id/replay", permEventsReplay, a.replayForm)
	page(http.MethodPost, "/console/sandbox/clock", permSandboxClock, a.sandboxClockForm)
	page(http.MethodGet, "/console/audit", permAudit, a.auditPage)
	page(http.MethodGet, "/console/*", permSignedIn, func(*consoleContext) error {
		return errNotFound(slugNotFound, "There is no such page.")
	})
}

// healthRoutes answers GET and HEAD (for probes that use HEAD).
func (a *App) healthRoutes(e *echo.Echo) {
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		e.Add(m, "/healthz", a.healthz)
		e.Add(m, "/readyz", a.readyz)
	}
}

// auditedPartnerAuth is partnerAuth inside the audit middleware, so that
// a request refused by authentication is audited too.
func (a *App) auditedPartnerAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return a.auditMiddleware(storage.AuditActorPartner)(a.partnerAuth(next))
}

// authedGroup registers routes that run auth before their own middleware,
// as route middleware, so that unknown paths stay 404 and wrong methods 405.
type authedGroup struct {
	g    *echo.Group
	auth echo.MiddlewareFunc
}

// add registers h behind auth and m. The route's chain (auth, then m, then h) is composed once, here: Echo
// composes the middleware it is given for a route anew on every request,
// a closure allocated per middleware per request
// (BenchmarkPrescriptionPage, alloc profile). The middleware functions
// only wrap next, so composing them once answers the same.
func (a authedGroup) add(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	for i := len(m) - 1; i >= 0; i-- {
		h = m[i](h)
	}
	a.g.Add(method, path, a.auth(h))
}

func (a authedGroup) GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	a.add(http.MethodGet, path, h, m...)
}

func (a authedGroup) POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	a.add(http.MethodPost, path, h, m...)
}

func (a authedGroup) PUT(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	a.add(http.MethodPut, path, h, m...)
}

func (a authedGroup) PATCH(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	a.add(http.MethodPatch, path, h, m...)
}

func (a authedGroup) DELETE(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	a.add(http.MethodDelete, path, h, m...)
}
