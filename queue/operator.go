package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
)

// Operational events (issue 30, item 4): when recording an attempt
// disables an endpoint, the queue logs it, reports it (Result.Disabled)
// and, when Options.OperatorURL is set, posts an endpoint.disabled event
// there, signed with Options.OperatorSecret by the spec's scheme
// (X-Webhook-Signature), from one goroutine the queue owns.
const (
	// EventEndpointDisabled is the operational event's type.
	EventEndpointDisabled = "endpoint.disabled"
	// operatorBuffer bounds the events waiting to be posted; beyond it one
	// is dropped, with a log line.
	operatorBuffer = 64
	// operatorAttempts bounds the attempts of one event; the waits between
	// them double from operatorBackoff.
	operatorAttempts = 5
	operatorBackoff  = time.Second
	operatorTimeout  = 10 * time.Second
)

// OperatorEvent is the body of an operational event.
type OperatorEvent struct {
	Type      string                `json:"type"`
	ID        string                `json:"id"`
	Timestamp string                `json:"timestamp"`
	Data      EndpointDisabledEvent `json:"data"`
}

// EndpointDisabledEvent is an endpoint.disabled event's data. It holds
// ids and times, never the endpoint's URL or secrets.
type EndpointDisabledEvent struct {
	EndpointID   string     `json:"endpoint_id"`
	PartnerID    string     `json:"partner_id"`
	DisabledAt   time.Time  `json:"disabled_at"`
	FailingSince *time.Time `json:"failing_since,omitempty"`
	Reason       string     `json:"reason"`
}

// operatorPost is one event to post.
type operatorPost struct {
	id   string
	body []byte
}

// disabled reports an endpoint that recording an attempt disabled: a
// log line, and the operator's webhook when one is set (never blocking).
func (q *Queue) disabled(e *storage.WebhookEndpoint) {
	var at time.Time
	if e.DisabledAt != nil {
		at = *e.DisabledAt
	}
	q.log.Warn("webhook endpoint disabled: every attempt failed for webhooks.disable_after; its deliveries are held until it is enabled",
		"endpoint_id", e.ID, "partner_id", e.PartnerID, "failing_since", e.FailingSince, "disabled_at", at)
	if q.operator == nil {
		return
	}
	ev := OperatorEvent{Type: EventEndpointDisabled, ID: storage.NewID(), Timestamp: q.clock.Now().UTC().Format(time.RFC3339),
		Data: EndpointDisabledEvent{EndpointID: e.ID, PartnerID: e.PartnerID, DisabledAt: at, FailingSince: e.FailingSince, Reason: e.DisabledReason}}
	body, err := json.Marshal(ev)
	if err != nil {
		q.log.Error("encoding an operational event failed", "error", err)
		return
	}
	select {
	case q.operator <- operatorPost{id: ev.ID, body: body}:
	default:
		q.log.Error("operational event dropped: too many are waiting to be posted", "type", ev.Type, "endpoint_id", e.ID)
	}
}

// postOperator posts the operational events until Stop; one whose
// attempts all fail is logged and dropped.
func (q *Queue) postOperator() {
	defer close(q.operatorDone)
	client := &http.Client{Timeout: operatorTimeout}
	ctx := q.operatorCtx
	for {
		var p operatorPost
		select {
		case p = <-q.operator:
		case <-ctx.Done():
			return
		}
		wait := operatorBackoff
		for attempt := 1; ; attempt++ {
			err := q.postOnce(ctx, client, p)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				q.log.Warn("an operational event was not posted before the queue stopped", "event_id", p.id)
				return
			}
			if attempt == operatorAttempts {
				q.log.Error("posting an operational event failed; it is dropped", "event_id", p.id, "attempts", attempt, "error", err)
				break
			}
			select {
			case <-time.After(wait):
				wait *= 2
				continue
			case <-ctx.Done():
				q.log.Warn("an operational event was not posted before the queue stopped", "event_id", p.id)
				return
			}
		}
	}
}

// postOnce makes one attempt: any 2xx answer is success.
func (q *Queue) postOnce(ctx context.Context, client *http.Client, p operatorPost) error {
	signAt := q.clock.Now()
	if q.opts.SignatureNow != nil {
		signAt = q.opts.SignatureNow()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, q.opts.OperatorURL, bytes.NewReader(p.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(signature.HeaderName, signature.Header(signAt, p.body, q.opts.OperatorSecret))
	req.Header.Set(headerWebhookID, p.id)
	req.Header.Set(headerUserAgent, q.userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &statusError{resp.StatusCode}
	}
	return nil
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "operator webhook answered " + http.StatusText(e.code) }
