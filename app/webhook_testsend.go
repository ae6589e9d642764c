package app

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Test sends (issue 30, item 3): a signed webhook.test event to one
// endpoint, through the outbox and the queue as any delivery, so that
// what the receiver sees (headers, signature, retries) is what it will
// see of real events.

// testSendPoll is how often a test send looks for its attempt while it
// waits.
const testSendPoll = 20 * time.Millisecond

// testSendWait bounds how long a test send waits for its first attempt:
// the attempt's own timeout, and a margin for the queue to claim and
// record it.
func (a *App) testSendWait() time.Duration {
	return a.cfg.Webhooks.Timeout + 5*time.Second
}

// testWebhookEndpoint is POST /admin/v1/webhook-endpoints/{id}/test: 200
// with the event and its first attempt once it is recorded, or 202 with
// the event still pending when no attempt was recorded within the wait
// (GET /admin/v1/events/{id} shows it later).
func (a *App) testWebhookEndpoint(c echo.Context) error {
	v, done, err := a.sendTest(c.Request().Context(), c.Param("endpoint_id"))
	if err != nil {
		return err
	}
	if !done {
		return a.respond(c, http.StatusAccepted, "Test event queued; no attempt yet", v, nil)
	}
	return a.ok(c, "Test event sent", v)
}

// sendTest writes a test event to the endpoint and waits, bounded, for
// its first attempt; done says whether one was recorded. An id that is
// not a uuid is 404.
func (a *App) sendTest(ctx context.Context, id string) (EventView, bool, error) {
	if err := checkID(id); err != nil {
		return EventView{}, false, err
	}
	ev, err := a.store.CreateTestEvent(ctx, id)
	if err != nil {
		return EventView{}, false, err
	}
	wait := time.NewTimer(a.testSendWait())
	defer wait.Stop()
	tick := time.NewTicker(testSendPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return eventView(ev), false, nil
		case <-wait.C:
			return eventView(ev), false, nil
		case <-tick.C:
		}
		got, err := a.store.GetEvent(ctx, ev.ID)
		if err != nil {
			if ctx.Err() != nil {
				return eventView(ev), false, nil
			}
			return EventView{}, false, err
		}
		if len(got.Attempts) > 0 {
			return eventView(got), true, nil
		}
		ev = got
	}
}

// testEndpointForm is the console's Send test event button: it sends, waits
// as the API does, and shows the event's page with the attempt.
func (a *App) testEndpointForm(cc *consoleContext) error {
	v, _, err := a.sendTest(cc.Request().Context(), cc.Param("endpoint_id"))
	if err != nil {
		return err
	}
	return cc.Redirect(http.StatusSeeOther, "/console/events/"+v.EventID)
}
