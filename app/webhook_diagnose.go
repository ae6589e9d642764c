package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/invopop/validation"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
)

// The findings the diagnosis adds to signature.Diagnose's, about the
// event the body is of.
const (
	// findingEventNotFound: no event with the id was sent to the
	// endpoint's partner (another partner's event is answered alike).
	findingEventNotFound = "event_not_found"
	// findingEventIDMissing: no event id was given and the body has none.
	findingEventIDMissing = "event_id_missing"
)

// WebhookDiagnoseRequest is the body of POST
// /admin/v1/webhook-endpoints/{endpoint_id}/diagnose: what a receiver
// saw. The body is given as a string (Body) or, when its bytes are not
// valid UTF-8 or must be passed exactly, in base64 (BodyBase64): one of
// the two.
type WebhookDiagnoseRequest struct {
	// Signature is the X-Webhook-Signature value received.
	Signature string `json:"signature"`
	// Body is the body verified, as a string.
	Body *string `json:"body"`
	// BodyBase64 is the body verified, in standard base64.
	BodyBase64 *string `json:"body_base64"`
	// EventID names the event; by default the body's event_id.
	EventID string `json:"event_id"`
	// ReceivedAt is the receiver's clock when it verified (RFC 3339); by
	// default now.
	ReceivedAt string `json:"received_at"`

	body       []byte
	receivedAt time.Time
}

// Validate checks that one body is given, that base64 decodes and that
// received_at is a time, and keeps the decoded values.
func (r *WebhookDiagnoseRequest) Validate() error {
	return validation.ValidateStruct(r,
		validation.Field(&r.Body, validation.By(func(any) error {
			if r.Body == nil && r.BodyBase64 == nil {
				return errors.New("give the body received, as body or body_base64")
			}
			if r.Body != nil && r.BodyBase64 != nil {
				return errors.New("give body or body_base64, not both")
			}
			if r.Body != nil {
				r.body = []byte(*r.Body)
			}
			return nil
		})),
		validation.Field(&r.BodyBase64, validation.By(func(any) error {
			if r.BodyBase64 == nil || r.Body != nil {
				return nil
			}
			b, err := base64.StdEncoding.DecodeString(*r.BodyBase64)
			if err != nil {
				return errors.New("must be standard base64")
			}
			r.body = b
			return nil
		})),
		validation.Field(&r.ReceivedAt, validation.By(func(any) error {
			if r.ReceivedAt == "" {
				return nil
			}
			t, err := time.Parse(time.RFC3339, r.ReceivedAt)
			if err != nil {
				return errors.New("must be an RFC 3339 time")
			}
			r.receivedAt = t
			return nil
		})),
	)
}

// WebhookDiagnosisView is the answer of a diagnosis: whether the header
// verifies the body, and why or why not. It never holds a secret.
type WebhookDiagnosisView struct {
	EndpointID string              `json:"endpoint_id"`
	EventID    string              `json:"event_id,omitempty"`
	ReceivedAt time.Time           `json:"received_at"`
	Verifies   bool                `json:"verifies"`
	Findings   []signature.Finding `json:"findings"`
}

// diagnoseWebhookSignature is POST
// /admin/v1/webhook-endpoints/{endpoint_id}/diagnose.
func (a *App) diagnoseWebhookSignature(c echo.Context) error {
	req := &WebhookDiagnoseRequest{}
	if err := bindAdmin(c, req); err != nil {
		return err
	}
	v, err := a.diagnoseDelivery(c.Request().Context(), c.Param("endpoint_id"), req)
	if err != nil {
		return err
	}
	return a.ok(c, "Signature diagnosed", v)
}

// diagnoseDelivery says why what a receiver of the endpoint saw does or
// does not verify: the event's stored payload is the bytes signed, and
// the endpoint's current and previous secrets are tried. An endpoint id
// that is not a uuid is 404.
func (a *App) diagnoseDelivery(ctx context.Context, endpointID string, req *WebhookDiagnoseRequest) (WebhookDiagnosisView, error) {
	if err := checkID(endpointID); err != nil {
		return WebhookDiagnosisView{}, err
	}
	e, err := a.store.GetWebhookEndpoint(ctx, endpointID)
	if err != nil {
		return WebhookDiagnosisView{}, err
	}
	now := req.receivedAt
	if now.IsZero() {
		now = a.now()
	}
	v := WebhookDiagnosisView{EndpointID: e.ID, EventID: req.EventID, ReceivedAt: now.UTC()}
	if v.EventID == "" {
		var ev struct {
			EventID string `json:"event_id"`
		}
		_ = json.Unmarshal(req.body, &ev)
		v.EventID = ev.EventID
	}
	var pre []signature.Finding
	signed, err := a.signedPayload(ctx, e, v.EventID)
	switch {
	case errors.Is(err, storage.ErrNotFound) && v.EventID == "":
		pre = append(pre, signature.Finding{Code: findingEventIDMissing,
			Message: "No event id was given and the body has no event_id: the body cannot be compared with the bytes signed, only the header, the timestamp and the secrets are diagnosed."})
	case errors.Is(err, storage.ErrNotFound):
		pre = append(pre, signature.Finding{Code: findingEventNotFound,
			Message: "No event " + quoteID(v.EventID) + " was sent to this endpoint's partner: the body cannot be compared with the bytes signed, only the header, the timestamp and the secrets are diagnosed."})
	case err != nil:
		return WebhookDiagnosisView{}, err
	}
	d := signature.Diagnose(signature.Input{
		Header: req.Signature, Body: req.body, Signed: signed, Secrets: endpointSecrets(e), Now: now,
	})
	v.Verifies = d.Verifies
	v.Findings = append(pre, d.Findings...)
	return v, nil
}

// signedPayload is the bytes signed for the event id, an event of e's
// partner; storage.ErrNotFound when there is none (or it is another
// partner's, which is not told apart).
func (a *App) signedPayload(ctx context.Context, e *storage.WebhookEndpoint, eventID string) ([]byte, error) {
	if !isUUID(eventID) {
		return nil, storage.ErrNotFound
	}
	ev, err := a.store.GetEvent(ctx, eventID)
	if err != nil {
		return nil, err
	}
	if ev.PartnerID != e.PartnerID {
		return nil, storage.ErrNotFound
	}
	return ev.Payload, nil
}

// endpointSecrets are the secrets the store keeps for e, with what it
// keeps of their history: the current one, in use since the last
// rotation (or the endpoint's creation), and the one that rotation
// replaced. Secrets replaced earlier are not kept.
func endpointSecrets(e *storage.WebhookEndpoint) []signature.Secret {
	since := e.CreatedAt
	if e.RotatedAt != nil {
		since = *e.RotatedAt
	}
	out := []signature.Secret{{ID: "current", Value: e.Secret, Since: since}}
	if e.PreviousSecret != "" && e.RotatedAt != nil {
		out = append(out, signature.Secret{ID: "previous", Value: e.PreviousSecret, RotatedOut: *e.RotatedAt, SignsUntil: e.PreviousUntil})
	}
	return out
}

// quoteID shows an id a client gave, cut to a uuid's length.
func quoteID(id string) string {
	if len(id) > 36 {
		id = id[:36] + "…"
	}
	b, _ := json.Marshal(id)
	return string(b)
}

// diagnoseData is the console's diagnosis page: the endpoint, the form as
// filled, and the diagnosis once there is one.
type diagnoseData struct {
	Endpoint WebhookEndpointView
	Form     WebhookDiagnoseRequest
	Body     string
	Base64   bool
	Result   *WebhookDiagnosisView
}

// diagnosePage shows the diagnosis form of the endpoint its path names.
func (a *App) diagnosePage(cc *consoleContext) error {
	v, err := a.findEndpoint(cc.Request().Context(), cc.Param("endpoint_id"))
	if err != nil {
		return err
	}
	return cc.render(http.StatusOK, "diagnose", consoleView{Title: "Diagnose a signature", Section: "endpoints", Data: diagnoseData{Endpoint: v}})
}

// diagnoseForm diagnoses what the form holds, as the operator API's
// diagnose does, and shows the form again with the findings.
func (a *App) diagnoseForm(cc *consoleContext) error {
	ctx := cc.Request().Context()
	v, err := a.findEndpoint(ctx, cc.Param("endpoint_id"))
	if err != nil {
		return err
	}
	form := cc.Request().PostForm
	// A text area's line breaks arrive as CR LF (HTML's form encoding);
	// deliveries are compact JSON, so LF is what was pasted.
	body := strings.ReplaceAll(form.Get("body"), "\r\n", "\n")
	d := diagnoseData{Endpoint: v, Body: body, Base64: form.Get("base64") != ""}
	req := WebhookDiagnoseRequest{Signature: strings.TrimSpace(form.Get("signature")),
		EventID: strings.TrimSpace(form.Get("event_id")), ReceivedAt: strings.TrimSpace(form.Get("received_at"))}
	if d.Base64 {
		b64 := strings.Join(strings.Fields(body), "")
		req.BodyBase64 = &b64
	} else {
		req.Body = &body
	}
	d.Form = req
	err = checkRequest(&req, nil)
	var res WebhookDiagnosisView
	if err == nil {
		res, err = a.diagnoseDelivery(ctx, v.EndpointID, &req)
	}
	var apiErr *Error
	if errors.As(err, &apiErr) && apiErr.Status < 500 {
		return cc.render(apiErr.Status, "diagnose", consoleView{Title: "Diagnose a signature", Section: "endpoints", Error: apiErr, Data: d})
	}
	if err != nil {
		return err
	}
	d.Result = &res
	return cc.render(http.StatusOK, "diagnose", consoleView{Title: "Diagnose a signature", Section: "endpoints", Data: d})
}
