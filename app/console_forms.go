package app

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// The console's forms, each a POST that consolePage has checked (session,
// origin, CSRF token). Each reads its own form and path, calls the
// operator API's operation, and answers with a redirect to the page that
// shows the outcome, or the page again with the form's error.

// consoleMaxForm bounds a console form's body.
const consoleMaxForm = 16 << 10

// parseForm reads an urlencoded form of at most consoleMaxForm bytes.
func (cc *consoleContext) parseForm() error {
	r := cc.Request()
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return errBadRequest("Send the form as application/x-www-form-urlencoded.")
	}
	r.Body = http.MaxBytesReader(cc.Response(), r.Body, consoleMaxForm)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge.withCause(err)
		}
		return errBadRequest("The form could not be read.").withCause(err)
	}
	return nil
}

// secretData is the page that shows a new secret, once.
type secretData struct {
	Endpoint WebhookEndpointView
	Rotated  bool
}

// registerEndpointForm registers a webhook endpoint and sends the browser
// to its secret, shown once; a registration the API would refuse shows the
// endpoints page again with the form as filled in.
func (a *App) registerEndpointForm(cc *consoleContext) error {
	ctx := cc.Request().Context()
	form := cc.Request().PostForm
	req := a.newEndpointRequest()
	req.PartnerID, req.URL = strings.TrimSpace(form.Get("partner_id")), strings.TrimSpace(form.Get("url"))
	req.SignatureScheme = strings.TrimSpace(form.Get("signature_scheme"))
	err := checkRequest(req, nil)
	var v WebhookEndpointView
	if err == nil {
		v, err = a.registerEndpoint(ctx, req)
	}
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.Status < 500 {
		d, derr := a.readEndpointsData(ctx)
		if derr != nil {
			return derr
		}
		d.Form = *req
		return cc.render(apiErr.Status, "endpoints", consoleView{Title: "Webhook endpoints", Section: "endpoints", Error: apiErr, Data: d})
	}
	if err != nil {
		return err
	}
	a.console.stash(cc.session, secretData{Endpoint: v})
	return cc.Redirect(http.StatusSeeOther, "/console/endpoints/secret")
}

// sandboxClockForm moves the sandbox's clock forward (POST
// /admin/v1/sandbox/clock) and sends the browser back to the events,
// where retries that fell due show; outside the sandbox it is the 409.
func (a *App) sandboxClockForm(cc *consoleContext) error {
	if a.sandboxClock == nil {
		return errNotSandbox()
	}
	req := &SandboxClockRequest{Advance: strings.TrimSpace(cc.Request().PostForm.Get("advance"))}
	if err := checkRequest(req, nil); err != nil {
		return err
	}
	a.moveSandboxClock(req.d)
	return cc.Redirect(http.StatusSeeOther, "/console/events")
}

// rotateEndpointForm gives the endpoint its path names a new secret and
// sends the browser to it, shown once.
func (a *App) rotateEndpointForm(cc *consoleContext) error {
	v, err := a.rotateEndpointSecret(cc.Request().Context(), cc.Param("endpoint_id"))
	if err != nil {
		return err
	}
	a.console.stash(cc.session, secretData{Endpoint: v, Rotated: true})
	return cc.Redirect(http.StatusSeeOther, "/console/endpoints/secret")
}

// enableEndpointForm enables the endpoint its path names.
func (a *App) enableEndpointForm(cc *consoleContext) error {
	if _, err := a.enableEndpoint(cc.Request().Context(), cc.Param("endpoint_id")); err != nil {
		return err
	}
	return cc.Redirect(http.StatusSeeOther, "/console/endpoints?notice=enabled")
}

// recoverEndpointForm replays the endpoint's failed events since the
// form's time, as POST .../recover does.
func (a *App) recoverEndpointForm(cc *consoleContext) error {
	req := &WebhookRecoverRequest{Since: strings.TrimSpace(cc.Request().PostForm.Get("since"))}
	if err := checkRequest(req, nil); err != nil {
		return err
	}
	if _, err := a.recoverEndpoint(cc.Request().Context(), cc.Param("endpoint_id"), req.since); err != nil {
		return err
	}
	return cc.Redirect(http.StatusSeeOther, "/console/endpoints?notice=recovered")
}

// deleteEndpointForm deletes the endpoint its path names.
func (a *App) deleteEndpointForm(cc *consoleContext) error {
	if err := a.removeEndpoint(cc.Request().Context(), cc.Param("endpoint_id")); err != nil {
		return err
	}
	return cc.Redirect(http.StatusSeeOther, "/console/endpoints?notice=deleted")
}

// replayForm starts a new round of the event its path names; a replay the
// API refuses as a conflict shows the event page again with the reason.
func (a *App) replayForm(cc *consoleContext) error {
	ctx, id := cc.Request().Context(), cc.Param("event_id")
	v, err := a.replay(ctx, id)
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusConflict {
		current, ferr := a.findEvent(ctx, id)
		if ferr != nil {
			return ferr
		}
		return a.renderEvent(cc, apiErr.Status, current, "", apiErr)
	}
	if err != nil {
		return err
	}
	return cc.Redirect(http.StatusSeeOther, "/console/events/"+url.PathEscape(v.EventID)+"?notice=replayed")
}
