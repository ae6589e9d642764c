package app

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// partnerRoutes is the partner API's route table (spec section 4), under
// http.base_path, plus health and the built-in issuer's JWKS at the root.
func (a *App) partnerRoutes(e *echo.Echo) {
	e.GET("/healthz", a.healthz)
	e.GET("/readyz", a.readyz)
	base := e.Group(a.cfg.HTTP.BasePath)
	if a.issuer != nil {
		e.GET("/.well-known/jwks.json", a.jwks)
		base.POST("/v1/token", a.issueToken)
	}

	org := base.Group("/v1/organizations/:organization_id", a.partnerAuth)
	org.GET("/validate", a.validateOrganization)

	forbidden := http.StatusForbidden
	user := org.Group("/users/:user_id", requireUserAccess(forbidden))
	user.POST("/patients", a.createPatient, requireScope(forbidden, "create:patient"))
	user.PUT("/patients/:patient_id", a.updatePatient, requireScope(forbidden, "update:patient"))
	user.GET("/patients/:patient_id/prescriptions", a.listPrescriptions, requireScope(forbidden, "read:patient_prescription"))
}

// adminRoutes is the operator API's route table.
func (a *App) adminRoutes(e *echo.Echo) {
	e.GET("/healthz", a.healthz)
	e.GET("/readyz", a.readyz)
	g := e.Group("/admin/v1", a.adminAuth)
	g.POST("/partners", a.createPartner)
	g.GET("/partners", a.listPartners)
	g.POST("/partners/:partner_id/rotate-secret", a.rotatePartnerSecret)
	g.POST("/organizations", a.createOrganization)
	g.GET("/organizations", a.listOrganizations)
	g.GET("/organizations/:organization_id", a.getOrganization)
	g.POST("/organizations/:organization_id/rotate-secret", a.rotateOrganizationSecret)
	g.POST("/organizations/:organization_id/users", a.createUser)
	g.GET("/organizations/:organization_id/users/:user_id", a.getUserAdmin)
	g.POST("/organizations/:organization_id/users/:user_id/patients", a.createPatientAdmin)
	g.GET("/organizations/:organization_id/users/:user_id/patients/:patient_id", a.getPatientAdmin)
	g.POST("/organizations/:organization_id/users/:user_id/patients/:patient_id/prescriptions", a.createPrescription)
	g.PATCH("/organizations/:organization_id/users/:user_id/patients/:patient_id/prescriptions/:scid", a.updatePrescription)
	g.POST("/tokens", a.createToken)
}
