package app

import (
	"context"
	"errors"
	"time"

	"github.com/invopop/validation"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// Endpoint health (issue 30, item 4): an endpoint whose every attempt has
// failed for webhooks.disable_after is disabled and its deliveries held
// (storage/health.go); enable resumes them, and recover replays the
// endpoint's failed events paced at webhooks.recover_rate per second.

// maxRecover bounds the events one recovery replays; the answer says when
// there were more (call it again with a later since).
const maxRecover = 10_000

// WebhookRecoverRequest is the body of POST
// /admin/v1/webhook-endpoints/{endpoint_id}/recover.
type WebhookRecoverRequest struct {
	// Since: the endpoint's events created at or after it whose delivery
	// to it failed are replayed. RFC 3339.
	Since string `json:"since"`

	since time.Time
}

// Validate checks the request.
func (r *WebhookRecoverRequest) Validate() error {
	return validation.ValidateStruct(r,
		validation.Field(&r.Since, validation.Required, validation.By(func(any) error {
			t, err := time.Parse(time.RFC3339Nano, r.Since)
			if err != nil {
				return errors.New("must be an RFC 3339 time")
			}
			r.since = t
			return nil
		})),
	)
}

// WebhookRecoverView is what a recovery did.
type WebhookRecoverView struct {
	EndpointID string    `json:"endpoint_id"`
	Since      time.Time `json:"since"`
	// Replayed counts the events replayed to the endpoint; Skipped those
	// that could not be now (pending to another endpoint, or their
	// organization gone).
	Replayed int `json:"replayed"`
	Skipped  int `json:"skipped"`
	// FirstDue and LastDue span the replays' due times, spread at
	// webhooks.recover_rate per second.
	FirstDue *time.Time `json:"first_due,omitempty"`
	LastDue  *time.Time `json:"last_due,omitempty"`
	// Truncated: more than 10,000 events matched; the rest are left for
	// another recovery from a later since.
	Truncated bool `json:"truncated"`
}

// enableWebhookEndpoint is POST /admin/v1/webhook-endpoints/{id}/enable.
func (a *App) enableWebhookEndpoint(c echo.Context) error {
	v, err := a.enableEndpoint(c.Request().Context(), c.Param("endpoint_id"))
	if err != nil {
		return err
	}
	return a.ok(c, "Webhook endpoint enabled", v)
}

// enableEndpoint enables the endpoint; its held deliveries resume. An id
// that is not a uuid is 404.
func (a *App) enableEndpoint(ctx context.Context, id string) (WebhookEndpointView, error) {
	if err := checkID(id); err != nil {
		return WebhookEndpointView{}, err
	}
	e, err := a.store.EnableWebhookEndpoint(ctx, id)
	if err != nil {
		return WebhookEndpointView{}, err
	}
	return webhookEndpointView(e, "", a.now()), nil
}

// recoverWebhookEndpoint is POST /admin/v1/webhook-endpoints/{id}/recover.
// An endpoint that does not exist is 404 before the body is read, as
// another partner's is for a partner key.
func (a *App) recoverWebhookEndpoint(c echo.Context) error {
	if _, err := a.findEndpoint(c.Request().Context(), c.Param("endpoint_id")); err != nil {
		return err
	}
	req := &WebhookRecoverRequest{}
	if err := bindAdmin(c, req); err != nil {
		return err
	}
	v, err := a.recoverEndpoint(c.Request().Context(), c.Param("endpoint_id"), req.since)
	if err != nil {
		return err
	}
	return a.ok(c, "Webhook endpoint recovery queued", v)
}

// recoverEndpoint replays, to the endpoint only, every event of its
// partner created since then whose delivery to it failed, the replays due
// 1/recover_rate seconds apart from now, so that a receiver coming back
// is not flooded. A disabled endpoint is refused (409): its replays would
// be held and then all be due at once. An id that is not a uuid is 404.
func (a *App) recoverEndpoint(ctx context.Context, id string, since time.Time) (WebhookRecoverView, error) {
	if err := checkID(id); err != nil {
		return WebhookRecoverView{}, err
	}
	e, err := a.store.GetWebhookEndpoint(ctx, id)
	if err != nil {
		return WebhookRecoverView{}, err
	}
	if e.Disabled() {
		return WebhookRecoverView{}, errConflict("The endpoint is disabled: enable it first, then recover.")
	}
	v := WebhookRecoverView{EndpointID: id, Since: since.UTC()}
	ids, truncated, err := a.failedEventsOf(ctx, e, since)
	if err != nil {
		return WebhookRecoverView{}, err
	}
	v.Truncated = truncated
	step := time.Second / time.Duration(max(1, a.cfg.Webhooks.RecoverRate))
	due := a.now()
	for _, evID := range ids {
		_, err := a.store.ReplayEventTo(ctx, evID, id, due)
		switch {
		case err == nil:
			d := storage.Timestamp(due)
			if v.FirstDue == nil {
				v.FirstDue = &d
			}
			v.LastDue = &d
			v.Replayed++
			due = due.Add(step)
		case errors.Is(err, storage.ErrEventPending), errors.Is(err, storage.ErrNotValidated), errors.Is(err, storage.ErrNotFound):
			v.Skipped++
		default:
			return WebhookRecoverView{}, err
		}
	}
	return v, nil
}

// failedEventsOf lists, oldest first, the ids of the partner's failed
// events created at or after since whose delivery to e failed, at most
// maxRecover (truncated says there were more).
func (a *App) failedEventsOf(ctx context.Context, e *storage.WebhookEndpoint, since time.Time) ([]string, bool, error) {
	var ids []string
	f := storage.EventFilter{PartnerID: e.PartnerID, Status: storage.EventFailed}
	page := storage.PageRequest{Limit: eventPageMax}
	for {
		events, info, err := a.store.ListEvents(ctx, f, page)
		if err != nil {
			return nil, false, err
		}
		for i := range events {
			ev := &events[i]
			if ev.CreatedAt.Before(since) || !failedTo(ev, e.ID) {
				continue
			}
			if len(ids) == maxRecover {
				return ids, true, nil
			}
			ids = append(ids, ev.ID)
		}
		if !info.HasNext || info.LastKey == "" {
			return ids, false, nil
		}
		page.Cursor = info.LastKey
	}
}

// failedTo reports whether ev's current round failed to the endpoint.
func failedTo(ev *storage.Event, endpointID string) bool {
	for _, t := range ev.Targets {
		if t.EndpointID == endpointID && t.Status == storage.EventFailed {
			return true
		}
	}
	return false
}
