package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/invopop/validation"
	"github.com/invopop/validation/is"
	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/queue/signature"
	"github.com/rxgate/rxgate/storage"
)

// Event list page sizes: the operator's lists follow the user list's range
// (spec 8).
const (
	eventPageDefault = 20
	eventPageMax     = 100
)

// --- webhook endpoints ---

// WebhookEndpointCreateRequest is the body of POST
// /admin/v1/webhook-endpoints.
type WebhookEndpointCreateRequest struct {
	PartnerID string `json:"partner_id"`
	URL       string `json:"url"`
	// SignatureScheme is "rxgate" (the default) or "standard".
	SignatureScheme string `json:"signature_scheme,omitempty"`

	allowInsecureLoopback bool
	allowedNetworks       []netip.Prefix
}

// Validate checks the request, the URL against the delivery rules (spec
// 6.3: https with a valid certificate; http to loopback only when
// webhooks.allow_insecure_loopback is on) and, for early feedback, a host
// written as an address against the addresses deliveries may connect to
// (queue.Destinations; a name is judged when it is dialled).
func (r *WebhookEndpointCreateRequest) Validate() error {
	dest := queue.Destinations{AllowLoopback: r.allowInsecureLoopback, Allowed: r.allowedNetworks}
	return validation.ValidateStruct(r,
		validation.Field(&r.PartnerID, validation.Required, is.UUID.Error("must be a valid uuid")),
		validation.Field(&r.URL, validation.Required, validation.By(func(any) error {
			var ue *queue.URLError
			err := queue.CheckURL(r.URL, r.allowInsecureLoopback)
			if err == nil {
				err = dest.CheckHost(r.URL)
			}
			if errors.As(err, &ue) {
				return errors.New(ue.Reason)
			}
			return nil
		})),
		validation.Field(&r.SignatureScheme, validation.In(storage.SchemeRxgate, storage.SchemeStandard).Error(schemeMessage)),
	)
}

// schemeMessage is the validation message of a signature_scheme.
const schemeMessage = `must be "rxgate" or "standard"`

// WebhookEndpointUpdateRequest is the body of PATCH
// /admin/v1/webhook-endpoints/{endpoint_id}: the members sent change.
type WebhookEndpointUpdateRequest struct {
	SignatureScheme *string `json:"signature_scheme"`
}

// Validate checks the update.
func (r *WebhookEndpointUpdateRequest) Validate() error {
	return validation.ValidateStruct(r,
		validation.Field(&r.SignatureScheme, validation.NilOrNotEmpty.Error(schemeMessage),
			validation.In(storage.SchemeRxgate, storage.SchemeStandard).Error(schemeMessage)),
	)
}

// WebhookEndpointView is an endpoint as the operator API shows it. Secret is
// set only on create and rotation.
type WebhookEndpointView struct {
	EndpointID string `json:"endpoint_id"`
	PartnerID  string `json:"partner_id"`
	URL        string `json:"url"`
	Secret     string `json:"secret,omitempty"`
	// SignatureScheme is "rxgate" or "standard"; a standard endpoint's
	// secret is shown as whsec_<base64>.
	SignatureScheme string     `json:"signature_scheme"`
	CreatedAt       time.Time  `json:"created_at"`
	RotatedAt       *time.Time `json:"rotated_at,omitempty"`
	// PreviousSecretExpiresAt is when deliveries stop carrying a signature
	// made with the secret before the last rotation.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	// SecretID names the current secret, and PreviousSecretID the one
	// before the last rotation while it still signs (storage.SecretID):
	// an attempt's secret_ids are these.
	SecretID         string `json:"secret_id"`
	PreviousSecretID string `json:"previous_secret_id,omitempty"`
	// Disabled: the endpoint's deliveries are held until it is enabled
	// (POST .../enable); DisabledAt and DisabledReason say when and why.
	Disabled       bool       `json:"disabled"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
	// FailingSince is when the endpoint's current streak of failed
	// attempts began; absent when its last attempt succeeded.
	FailingSince *time.Time `json:"failing_since,omitempty"`
}

// webhookEndpointView is e as shown; secret, the stored secret, is shown in
// the form the endpoint's scheme uses (whsec_ for standard).
func webhookEndpointView(e *storage.WebhookEndpoint, secret string, now time.Time) WebhookEndpointView {
	if secret != "" && e.Scheme() == storage.SchemeStandard {
		secret = signature.StandardSecret(secret)
	}
	v := WebhookEndpointView{
		EndpointID: e.ID, PartnerID: e.PartnerID, URL: e.URL, Secret: secret, SignatureScheme: e.Scheme(),
		CreatedAt: e.CreatedAt, RotatedAt: e.RotatedAt,
		SecretID: storage.SecretID(e.Secret),
		Disabled: e.Disabled(), DisabledAt: e.DisabledAt, DisabledReason: e.DisabledReason, FailingSince: e.FailingSince,
	}
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		until := e.PreviousUntil
		v.PreviousSecretExpiresAt = &until
		v.PreviousSecretID = storage.SecretID(e.PreviousSecret)
	}
	return v
}

func (a *App) createWebhookEndpoint(c echo.Context) error {
	req := a.newEndpointRequest()
	if err := bindAdmin(c, req); err != nil {
		return err
	}
	v, err := a.registerEndpoint(c.Request().Context(), req)
	if err != nil {
		return err
	}
	return a.created(c, "Webhook endpoint created", v)
}

// newEndpointRequest is an empty registration, checked by this instance's
// URL rules.
func (a *App) newEndpointRequest() *WebhookEndpointCreateRequest {
	return &WebhookEndpointCreateRequest{
		allowInsecureLoopback: a.cfg.Webhooks.AllowInsecureLoopback,
		allowedNetworks:       a.cfg.Webhooks.AllowedPrefixes(),
	}
}

// registerEndpoint stores a checked registration with a new secret, which
// the view carries (shown once).
func (a *App) registerEndpoint(ctx context.Context, req *WebhookEndpointCreateRequest) (WebhookEndpointView, error) {
	secret := storage.NewSecret()
	e := &storage.WebhookEndpoint{PartnerID: req.PartnerID, URL: req.URL, Secret: secret, SignatureScheme: req.SignatureScheme}
	err := a.store.CreateWebhookEndpoint(ctx, e)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return WebhookEndpointView{}, errValidation(http.StatusUnprocessableEntity, []FieldError{{Field: "partner_id", Message: "must name an existing partner", Code: codeValidation}})
	case errors.Is(err, storage.ErrAlreadyExists):
		return WebhookEndpointView{}, errConflict("The partner already has a webhook endpoint with this url.").withCause(err)
	case err != nil:
		return WebhookEndpointView{}, err
	}
	return webhookEndpointView(e, secret, a.now()), nil
}

// listWebhookEndpoints is GET /admin/v1/webhook-endpoints: the endpoints
// of the partner the query's partner_id names, or of every partner.
func (a *App) listWebhookEndpoints(c echo.Context) error {
	q, err := query(c)
	if err != nil {
		return err
	}
	partnerID, err := endpointListParams(q)
	if err != nil {
		return err
	}
	out, err := a.findEndpoints(c.Request().Context(), partnerID)
	if err != nil {
		return err
	}
	return a.ok(c, "Webhook endpoints retrieved", out)
}

// endpointListParams reads the endpoint list's query: the partner_id
// filter, "" when absent.
func endpointListParams(q url.Values) (partnerID string, err error) {
	partnerID = q.Get("partner_id")
	if partnerID != "" && validation.Validate(partnerID, is.UUID) != nil {
		return "", errValidation(http.StatusBadRequest, []FieldError{{Field: "partner_id", Message: "must be a valid uuid", Code: codeValidation}})
	}
	return partnerID, nil
}

// findEndpoints reads the endpoints of the partner, or of every partner
// when partnerID is "".
func (a *App) findEndpoints(ctx context.Context, partnerID string) ([]WebhookEndpointView, error) {
	// A partner key lists its own partner's endpoints only; asking for
	// another partner's answers as a partner without endpoints does.
	if scope := partnerScope(ctx); scope != "" {
		if partnerID != "" && partnerID != scope {
			return []WebhookEndpointView{}, nil
		}
		partnerID = scope
	}
	es, err := a.store.ListWebhookEndpoints(ctx, partnerID)
	if err != nil {
		return nil, err
	}
	now := a.now()
	out := make([]WebhookEndpointView, len(es))
	for i := range es {
		out[i] = webhookEndpointView(&es[i], "", now)
	}
	return out, nil
}

func (a *App) getWebhookEndpoint(c echo.Context) error {
	v, err := a.findEndpoint(c.Request().Context(), c.Param("endpoint_id"))
	if err != nil {
		return err
	}
	return a.ok(c, "Webhook endpoint retrieved", v)
}

// findEndpoint reads the endpoint; an id that is not a uuid is 404.
func (a *App) findEndpoint(ctx context.Context, id string) (WebhookEndpointView, error) {
	if err := checkID(id); err != nil {
		return WebhookEndpointView{}, err
	}
	e, err := a.store.GetWebhookEndpoint(ctx, id)
	if err != nil {
		return WebhookEndpointView{}, err
	}
	return webhookEndpointView(e, "", a.now()), nil
}

// updateWebhookEndpoint is PATCH /admin/v1/webhook-endpoints/{id}: it
// changes the signature scheme. When the scheme changes the answer carries
// the secret in the new scheme's form (the same key: a receiver must be
// given it to verify the new headers); otherwise no secret.
func (a *App) updateWebhookEndpoint(c echo.Context) error {
	req := &WebhookEndpointUpdateRequest{}
	if err := bindAdmin(c, req); err != nil {
		return err
	}
	v, err := a.updateEndpoint(c.Request().Context(), c.Param("endpoint_id"), req)
	if err != nil {
		return err
	}
	return a.ok(c, "Webhook endpoint updated", v)
}

// updateEndpoint applies a checked update; an id that is not a uuid is 404.
func (a *App) updateEndpoint(ctx context.Context, id string, req *WebhookEndpointUpdateRequest) (WebhookEndpointView, error) {
	if err := checkID(id); err != nil {
		return WebhookEndpointView{}, err
	}
	e, err := a.store.GetWebhookEndpoint(ctx, id)
	if err != nil {
		return WebhookEndpointView{}, err
	}
	if req.SignatureScheme == nil || *req.SignatureScheme == e.Scheme() {
		return webhookEndpointView(e, "", a.now()), nil
	}
	if e, err = a.store.SetWebhookSignatureScheme(ctx, id, *req.SignatureScheme); err != nil {
		return WebhookEndpointView{}, err
	}
	return webhookEndpointView(e, e.Secret, a.now()), nil
}

func (a *App) deleteWebhookEndpoint(c echo.Context) error {
	id := c.Param("endpoint_id")
	if err := a.removeEndpoint(c.Request().Context(), id); err != nil {
		return err
	}
	return a.ok(c, "Webhook endpoint deleted", map[string]string{"endpoint_id": id})
}

// removeEndpoint deletes the endpoint; an id that is not a uuid is 404.
func (a *App) removeEndpoint(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	return a.store.DeleteWebhookEndpoint(ctx, id)
}

func (a *App) rotateWebhookSecret(c echo.Context) error {
	v, err := a.rotateEndpointSecret(c.Request().Context(), c.Param("endpoint_id"))
	if err != nil {
		return err
	}
	return a.ok(c, "Webhook secret rotated", v)
}

// rotateEndpointSecret gives the endpoint a new secret, which the view
// carries (shown once); for webhooks.rotation_grace deliveries carry a
// signature with the old one too. An id that is not a uuid is 404.
func (a *App) rotateEndpointSecret(ctx context.Context, id string) (WebhookEndpointView, error) {
	if err := checkID(id); err != nil {
		return WebhookEndpointView{}, err
	}
	secret := storage.NewSecret()
	now := a.now()
	e, err := a.store.RotateWebhookSecret(ctx, id, secret, now.Add(a.cfg.Webhooks.RotationGrace))
	if err != nil {
		return WebhookEndpointView{}, err
	}
	return webhookEndpointView(e, secret, now), nil
}

// --- events ---

// EventView is an event in the operator's event log.
type EventView struct {
	EventID        string    `json:"event_id"`
	EventType      string    `json:"event_type"`
	OrganizationID string    `json:"organization_id"`
	PartnerID      string    `json:"partner_id"`
	Status         string    `json:"status"`
	SkipReason     string    `json:"skip_reason,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	// Round is 1, plus one per replay.
	Round int `json:"round"`
	// Payload is the body delivered (spec 6.2).
	Payload  json.RawMessage       `json:"payload"`
	Targets  []storage.EventTarget `json:"targets"`
	Attempts []AttemptView         `json:"attempts"`
}

// AttemptView is one delivery attempt. StatusCode is null when no answer
// came; Error is null when the attempt succeeded.
type AttemptView struct {
	AttemptedAt time.Time `json:"attempted_at"`
	EndpointID  string    `json:"endpoint_id"`
	StatusCode  *int      `json:"status_code"`
	Error       *string   `json:"error"`
	DurationMS  int64     `json:"duration_ms"`
	// ErrorClass sorts a failure: dns, connect, tls, timeout,
	// http_status, body_too_large, refused, network or gone; null when
	// the attempt delivered cleanly.
	ErrorClass *string `json:"error_class"`
	// Signature is the signature header as sent, and SecretIDs the
	// endpoint's secrets that signed it (secret_id and
	// previous_secret_id of the endpoint), in the same order.
	Signature string   `json:"signature,omitempty"`
	SecretIDs []string `json:"secret_ids"`
	// Response is what the endpoint answered; null when no answer came,
	// or when the attempt is older than the newest ones of its event,
	// which alone keep it.
	Response *AttemptResponseView `json:"response"`
}

// AttemptResponseView is the kept part of an endpoint's answer. Body is
// set when the kept bytes are UTF-8, BodyBase64 otherwise.
type AttemptResponseView struct {
	Headers          [][2]string `json:"headers"`
	HeadersTruncated bool        `json:"headers_truncated"`
	Body             *string     `json:"body,omitempty"`
	BodyBase64       *string     `json:"body_base64,omitempty"`
	BodyTruncated    bool        `json:"body_truncated"`
}

// attemptView is at as the operator API and the console show it.
func attemptView(at *storage.Attempt) AttemptView {
	av := AttemptView{AttemptedAt: at.AttemptedAt, EndpointID: at.EndpointID, DurationMS: at.DurationMS,
		Signature: at.Signature, SecretIDs: at.SecretIDs}
	if av.SecretIDs == nil {
		av.SecretIDs = []string{}
	}
	if at.StatusCode != 0 {
		code := at.StatusCode
		av.StatusCode = &code
	}
	if at.Error != "" {
		msg := at.Error
		av.Error = &msg
	}
	if at.ErrorClass != "" {
		class := at.ErrorClass
		av.ErrorClass = &class
	}
	d := at.AttemptDetail
	if at.StatusCode != 0 && (d.ResponseHeaders != nil || d.ResponseBody != nil || d.BodyTruncated) {
		r := &AttemptResponseView{Headers: d.ResponseHeaders, HeadersTruncated: d.HeadersTruncated, BodyTruncated: d.BodyTruncated}
		if r.Headers == nil {
			r.Headers = [][2]string{}
		}
		switch {
		case len(d.ResponseBody) == 0:
		case utf8.Valid(d.ResponseBody):
			b := string(d.ResponseBody)
			r.Body = &b
		default:
			b := base64.StdEncoding.EncodeToString(d.ResponseBody)
			r.BodyBase64 = &b
		}
		av.Response = r
	}
	return av
}

func eventView(e *storage.Event) EventView {
	v := EventView{
		EventID: e.ID, EventType: e.Type, OrganizationID: e.OrganizationID, PartnerID: e.PartnerID,
		Status: e.Status, SkipReason: e.SkipReason, CreatedAt: e.CreatedAt, Round: e.Round,
		Payload: json.RawMessage(e.Payload), Targets: e.Targets, Attempts: make([]AttemptView, len(e.Attempts)),
	}
	if v.Targets == nil {
		v.Targets = []storage.EventTarget{}
	}
	for i := range e.Attempts {
		v.Attempts[i] = attemptView(&e.Attempts[i])
	}
	return v
}

// listEvents is GET /admin/v1/events: oldest first, filtered by
// organization_id and status, paged with limit and lastKey.
func (a *App) listEvents(c echo.Context) error {
	q, err := query(c)
	if err != nil {
		return err
	}
	f, page, err := eventListParams(q)
	if err != nil {
		return err
	}
	events, info, err := a.findEvents(c.Request().Context(), f, page)
	if err != nil {
		return err
	}
	return a.page(c, "Events retrieved", events, info)
}

// eventListParams reads the event list's query: the organization_id and
// status filters, and the page's limit and lastKey. The console's events
// page takes the same parameters. A bad limit is reported alone; bad
// filters together.
func eventListParams(q url.Values) (storage.EventFilter, storage.PageRequest, error) {
	var fields []FieldError
	f := storage.EventFilter{OrganizationID: q.Get("organization_id"), Status: q.Get("status")}
	if f.OrganizationID != "" && validation.Validate(f.OrganizationID, is.UUID) != nil {
		fields = append(fields, FieldError{Field: "organization_id", Message: "must be a valid uuid", Code: codeValidation})
	}
	if f.Status != "" && validation.Validate(f.Status, validation.In(anys(storage.EventStatuses)...)) != nil {
		fields = append(fields, FieldError{Field: "status", Message: "must be one of skipped, pending, delivered, failed", Code: codeValidation})
	}
	page, err := pageParams(q, eventPageDefault, eventPageMax)
	if err != nil {
		return f, page, err
	}
	if len(fields) > 0 {
		return f, page, errValidation(http.StatusBadRequest, fields)
	}
	return f, page, nil
}

// findEvents reads one page of the event log, oldest first. A partner key
// lists its own partner's events only, narrowed in the store
// (EventFilter.PartnerID): the page's count, offset and hasNext count
// that partner's events alone, and another partner's organization lists
// as one that does not exist, so nothing tells the other partners' events
// apart.
func (a *App) findEvents(ctx context.Context, f storage.EventFilter, page storage.PageRequest) ([]EventView, storage.PageInfo, error) {
	f.PartnerID = partnerScope(ctx)
	events, info, err := a.store.ListEvents(ctx, f, page)
	if err != nil {
		return nil, storage.PageInfo{}, err
	}
	out := make([]EventView, 0, len(events))
	for i := range events {
		out = append(out, eventView(&events[i]))
	}
	return out, info, nil
}

func (a *App) getEvent(c echo.Context) error {
	v, err := a.findEvent(c.Request().Context(), c.Param("event_id"))
	if err != nil {
		return err
	}
	return a.ok(c, "Event retrieved", v)
}

// findEvent reads the event; an id that is not a uuid is 404.
func (a *App) findEvent(ctx context.Context, id string) (EventView, error) {
	if err := checkID(id); err != nil {
		return EventView{}, err
	}
	e, err := a.store.GetEvent(ctx, id)
	if err != nil {
		return EventView{}, err
	}
	return eventView(e), nil
}

// replayEvent queues a fresh round of attempts of the same event (same
// event_id and body; each attempt signs with a new timestamp) to every
// endpoint its partner has now.
func (a *App) replayEvent(c echo.Context) error {
	v, err := a.replay(c.Request().Context(), c.Param("event_id"))
	if err != nil {
		return err
	}
	return a.ok(c, "Event replay queued", v)
}

// replay starts a new round of the event; an id that is not a uuid is 404.
func (a *App) replay(ctx context.Context, id string) (EventView, error) {
	if err := checkID(id); err != nil {
		return EventView{}, err
	}
	e, err := a.store.ReplayEvent(ctx, id)
	if err != nil {
		return EventView{}, replayRefusal(err)
	}
	return eventView(e), nil
}

// replayBlocked says why the event cannot be replayed now, as replay would
// refuse it, or nil when it can; the console shows it in place of the
// Replay button.
func (a *App) replayBlocked(ctx context.Context, v EventView) error {
	org, err := a.store.GetOrganization(ctx, v.OrganizationID)
	if errors.Is(err, storage.ErrNotFound) {
		return errConflict("The event's organization no longer exists.").withCause(err)
	}
	if err != nil {
		return err
	}
	endpoints, err := a.store.ListWebhookEndpoints(ctx, v.PartnerID)
	if err != nil {
		return err
	}
	e := storage.Event{Status: v.Status}
	if err := e.CheckReplay(org.Validated(), len(endpoints)); err != nil {
		return replayRefusal(err)
	}
	return nil
}

// replayRefusal says why an event cannot be replayed; the console shows the
// same words beside an event whose Replay button it leaves out.
func replayRefusal(err error) error {
	switch {
	case errors.Is(err, storage.ErrEventPending):
		return errConflict("The event is still being delivered; replay it once it is delivered or failed.").withCause(err)
	case errors.Is(err, storage.ErrNotValidated):
		return errConflict("Validate has not succeeded for the event's organization; nothing is sent for it.").withCause(err)
	case errors.Is(err, storage.ErrNoEndpoints):
		return errConflict("The event's partner has no webhook endpoint.").withCause(err)
	}
	return err
}
