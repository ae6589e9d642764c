package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/rxgate/rxgate/storage"
)

// The console's pages that only read. Each reads its own URL, calls the
// operator API's operations with the ids and filters it read, and renders
// what they return.

// consoleNotices are the notices a page shows after a form sent the
// browser to it, by the notice its URL carries.
var consoleNotices = map[string]string{
	"deleted":   "The endpoint was deleted.",
	"replayed":  "A new round of deliveries is queued.",
	"enabled":   "The endpoint is enabled: its held deliveries resume.",
	"recovered": "The endpoint's failed events since then are replayed, paced at webhooks.recover_rate per second.",
}

// overviewPage is the instance at a glance, as GET /admin/v1/overview has
// it. A role that may not see the instance's counts (a partner key's) is
// sent to its events instead.
func (a *App) overviewPage(cc *consoleContext) error {
	if who := identityFrom(cc.Request().Context()); who != nil && !who.can(permOverview) {
		return cc.Redirect(http.StatusSeeOther, "/console/events")
	}
	v, err := a.overview(cc.Request().Context())
	if err != nil {
		return err
	}
	return cc.render(http.StatusOK, "overview", consoleView{Title: "Overview", Section: "overview", Data: v})
}

// organizationsPage lists every organization.
func (a *App) organizationsPage(cc *consoleContext) error {
	orgs, err := a.findOrganizations(cc.Request().Context())
	if err != nil {
		return err
	}
	return cc.render(http.StatusOK, "organizations", consoleView{Title: "Organizations", Section: "organizations", Data: orgs})
}

// organizationData is the organization page: the organization, one page
// of its users, and its partner's webhook endpoints.
type organizationData struct {
	Org       OrganizationView
	Users     []UserView
	Page      storage.PageInfo
	NextURL   string
	Endpoints []WebhookEndpointView
}

// organizationPage shows the organization its path names, its users paged
// by the query's limit and lastKey, and its partner's endpoints.
func (a *App) organizationPage(cc *consoleContext) error {
	ctx := cc.Request().Context()
	org, err := a.findOrganization(ctx, cc.Param("organization_id"))
	if err != nil {
		return err
	}
	q, err := cc.query()
	if err != nil {
		return err
	}
	page, err := pageParams(q, userPageDefault, userPageMax)
	if err != nil {
		return err
	}
	var users []UserView
	var info storage.PageInfo
	if identityFrom(ctx).can(permUsersRead) { // the page hides them otherwise
		users, info, err = a.findOrganizationUsers(ctx, org.OrganizationID, page)
		if err != nil {
			return err
		}
	}
	endpoints, err := a.findEndpoints(ctx, org.PartnerID)
	if err != nil {
		return err
	}
	d := organizationData{Org: org, Users: users, Page: info, Endpoints: endpoints}
	if info.HasNext {
		next := url.Values{"lastKey": {info.LastKey}}
		if v := q.Get("limit"); v != "" {
			next.Set("limit", v)
		}
		d.NextURL = "?" + next.Encode()
	}
	return cc.render(http.StatusOK, "organization", consoleView{Title: org.Name, Section: "organizations", Data: d})
}

// endpointsData is the endpoints page: every endpoint, the partners to
// register one for, and the registration form.
type endpointsData struct {
	Endpoints []WebhookEndpointView
	Partners  []PartnerView
	PartnerOf map[string]string // partner id -> name
	// Form is the registration being corrected.
	Form WebhookEndpointCreateRequest
}

// readEndpointsData reads what the endpoints page shows, with an empty
// form.
func (a *App) readEndpointsData(ctx context.Context) (endpointsData, error) {
	endpoints, err := a.findEndpoints(ctx, "")
	if err != nil {
		return endpointsData{}, err
	}
	partners, err := a.findPartners(ctx)
	if err != nil {
		return endpointsData{}, err
	}
	d := endpointsData{Endpoints: endpoints, Partners: partners, PartnerOf: map[string]string{}}
	for _, p := range partners {
		d.PartnerOf[p.PartnerID] = p.Name
	}
	return d, nil
}

// endpointsPage lists every webhook endpoint, with the form that
// registers one.
func (a *App) endpointsPage(cc *consoleContext) error {
	d, err := a.readEndpointsData(cc.Request().Context())
	if err != nil {
		return err
	}
	return cc.render(http.StatusOK, "endpoints", consoleView{Title: "Webhook endpoints", Section: "endpoints",
		Notice: consoleNotices[cc.QueryParam("notice")], Data: d})
}

// secretPage shows the secret the last form made, once; a reload finds
// none.
func (a *App) secretPage(cc *consoleContext) error {
	if cc.Request().Method == http.MethodHead {
		return cc.NoContent(http.StatusOK) // a HEAD does not spend the secret's one showing
	}
	d := a.console.take(cc.session)
	if d == nil {
		return cc.render(http.StatusOK, "secret", consoleView{Title: "Secret shown already", Section: "endpoints"})
	}
	title := "Endpoint registered"
	if d.Rotated {
		title = "Secret rotated"
	}
	return cc.render(http.StatusOK, "secret", consoleView{Title: title, Section: "endpoints", Data: *d})
}

// deleteEndpointPage asks to confirm the deletion of the endpoint its
// path names; the form it shows posts to deleteEndpointForm.
func (a *App) deleteEndpointPage(cc *consoleContext) error {
	v, err := a.findEndpoint(cc.Request().Context(), cc.Param("endpoint_id"))
	if err != nil {
		return err
	}
	return cc.render(http.StatusOK, "delete", consoleView{Title: "Delete endpoint", Section: "endpoints", Data: v})
}

// eventsData is the events page: one page of the event log, the
// organizations to filter by, and the filters shown.
type eventsData struct {
	Events        []EventView
	Page          storage.PageInfo
	NextURL       string
	Organizations []OrganizationView
	OrgName       map[string]string
	Statuses      []string
	// The filters shown.
	OrganizationID, Status string
	// Clock, in rxgate sandbox only, is the server's clock and how far
	// it has been moved (the time-travel control).
	Clock *SandboxClockView
}

// eventsPage is one page of the event log, filtered and paged by the
// query as GET /admin/v1/events is (eventListParams).
func (a *App) eventsPage(cc *consoleContext) error {
	ctx := cc.Request().Context()
	q, err := cc.query()
	if err != nil {
		return err
	}
	f, page, err := eventListParams(q)
	if err != nil {
		return err
	}
	events, info, err := a.findEvents(ctx, f, page)
	if err != nil {
		return err
	}
	orgs, err := a.findOrganizations(ctx)
	if err != nil {
		return err
	}
	d := eventsData{Events: events, Page: info, Organizations: orgs, OrgName: map[string]string{}, Statuses: storage.EventStatuses,
		OrganizationID: f.OrganizationID, Status: f.Status}
	for _, o := range orgs {
		d.OrgName[o.OrganizationID] = o.Name
	}
	if a.sandboxClock != nil {
		d.Clock = &SandboxClockView{Now: a.sandboxClock.Now().UTC(), OffsetSeconds: int64(a.sandboxClock.Offset() / time.Second)}
	}
	if info.HasNext {
		next := url.Values{"lastKey": {info.LastKey}}
		for _, k := range []string{"organization_id", "status", "limit"} {
			if v := q.Get(k); v != "" {
				next.Set(k, v)
			}
		}
		d.NextURL = "?" + next.Encode()
	}
	return cc.render(http.StatusOK, "events", consoleView{Title: "Events", Section: "events", Data: d})
}

// eventData is the event page.
type eventData struct {
	Event   EventView
	Payload string // pretty-printed
	// Blocked says why the event cannot be replayed now; "" when it can.
	Blocked string
}

// eventPage shows the event its path names, with its Replay button or the
// reason it cannot be replayed now.
func (a *App) eventPage(cc *consoleContext) error {
	v, err := a.findEvent(cc.Request().Context(), cc.Param("event_id"))
	if err != nil {
		return err
	}
	return a.renderEvent(cc, http.StatusOK, v, consoleNotices[cc.QueryParam("notice")], nil)
}

// renderEvent writes the event page with status, a notice and the error
// of a form that failed (pageErr, nil when none).
func (a *App) renderEvent(cc *consoleContext, status int, v EventView, notice string, pageErr *Error) error {
	d := eventData{Event: v}
	var pretty bytes.Buffer
	if json.Indent(&pretty, v.Payload, "", "  ") == nil {
		d.Payload = pretty.String()
	} else {
		d.Payload = string(v.Payload)
	}
	if err := a.replayBlocked(cc.Request().Context(), v); err != nil {
		var apiErr *Error
		if !errors.As(err, &apiErr) || apiErr.Status >= 500 {
			return err
		}
		d.Blocked = apiErr.Detail
	}
	return cc.render(status, "event", consoleView{Title: "Event " + v.EventID, Section: "events", Notice: notice, Error: pageErr, Data: d})
}
