// Package receiver is a webhook receiver written from spec section 6.4
// alone: it verifies each delivery's signature with queue/signature and
// answers 200, or 400 when the signature does not verify (6.4.4). A
// delivery carrying a Standard Webhooks webhook-signature and no
// X-Webhook-Signature is verified on that scheme, with whsec_ secrets. `rxgate
// listen` serves it, and the tests' receivers are built on it.
package receiver

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rxgate/rxgate/queue/signature"
)

// DefaultMaxBody bounds the body read from one delivery.
const DefaultMaxBody = 1 << 20

// Delivery is one request the receiver answered.
type Delivery struct {
	ReceivedAt time.Time
	// EventID is the X-Webhook-Id header (webhook-id on the standard
	// scheme).
	EventID string
	// Signature is the X-Webhook-Signature header (webhook-signature on
	// the standard scheme).
	Signature string
	// Standard is true for a delivery on the Standard Webhooks scheme.
	Standard bool
	Header   http.Header
	Body     []byte
	// Err is why the delivery was rejected; nil when it verified.
	Err error
	// Diagnosis, with Receiver.Explain, says why a delivery whose
	// signature did not verify failed, as far as the receiver can tell
	// without the bytes rxgate signed (signature.Diagnose).
	Diagnosis *signature.Diagnosis
	// Status is the status answered.
	Status int
}

// Receiver is an http.Handler for deliveries at any path. It is safe for
// concurrent use once serving.
type Receiver struct {
	// Secrets are the webhook secrets a delivery may be signed with (two
	// while a rotation's grace period runs): as shown by rxgate, whsec_...
	// for an endpoint on the standard scheme.
	Secrets []string
	// Now is the clock for the timestamp tolerance; nil means time.Now.
	Now func() time.Time
	// Respond chooses the status of a delivery that verified; nil answers
	// 200. It may block (tests hold deliveries in flight with it).
	Respond func(d *Delivery) int
	// OnDelivery, when set, is called with every delivery after its status
	// is chosen and before the answer is written.
	OnDelivery func(d Delivery)
	// MaxBody bounds the body; 0 means DefaultMaxBody.
	MaxBody int64
	// Explain makes a delivery that fails verification carry a
	// Diagnosis.
	Explain bool
	// NoRecord stops Deliveries from keeping what was received (for a
	// long-running receiver).
	NoRecord bool

	mu         sync.Mutex
	deliveries []Delivery
}

var _ http.Handler = (*Receiver)(nil)

// ServeHTTP verifies and answers one delivery.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "deliveries are POSTed", http.StatusMethodNotAllowed)
		return
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	limit := r.MaxBody
	if limit <= 0 {
		limit = DefaultMaxBody
	}
	d := Delivery{
		ReceivedAt: now(),
		EventID:    req.Header.Get("X-Webhook-Id"),
		Signature:  req.Header.Get(signature.HeaderName),
		Header:     req.Header.Clone(),
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, limit))
	d.Body = body
	switch {
	case err != nil:
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			d.Err, d.Status = err, http.StatusRequestEntityTooLarge
		} else {
			d.Err, d.Status = err, http.StatusBadRequest
		}
	default:
		// The raw bytes, exactly as received, are what was signed.
		if signature.IsStandard(req.Header) {
			d.Standard = true
			d.EventID = req.Header.Get(signature.StandardIDHeader)
			d.Signature = req.Header.Get(signature.StandardSignatureHeader)
			d.Err = signature.VerifyStandard(r.Secrets, signature.StandardRequestOf(req.Header, body), d.ReceivedAt)
		} else {
			d.Err = signature.Verify(r.Secrets, d.Signature, body, d.ReceivedAt)
		}
		d.Status = http.StatusOK
		if d.Err != nil {
			d.Status = http.StatusBadRequest
			if r.Explain {
				d.Diagnosis = r.explain(d)
			}
		} else if r.Respond != nil {
			d.Status = r.Respond(&d)
		}
	}
	if !r.NoRecord {
		r.mu.Lock()
		r.deliveries = append(r.deliveries, d)
		r.mu.Unlock()
	}
	if r.OnDelivery != nil {
		r.OnDelivery(d)
	}
	if d.Err != nil {
		http.Error(w, d.Err.Error(), d.Status)
		return
	}
	w.WriteHeader(d.Status)
}

// explain diagnoses a delivery that did not verify with what a receiver
// has: the secrets it was given, named by their order ("first",
// "second", ...), with no rotation history, and the body received; the
// signed bytes are rxgate's to know, so a re-encoded body is told only by
// what undoing common changes proves, or by hints.
func (r *Receiver) explain(d Delivery) *signature.Diagnosis {
	secrets := make([]signature.Secret, len(r.Secrets))
	for i, s := range r.Secrets {
		secrets[i] = signature.Secret{ID: Ordinal(i), Value: s}
	}
	diag := signature.Diagnose(signature.Input{Header: d.Signature, Body: d.Body, Secrets: secrets, Now: d.ReceivedAt})
	return &diag
}

// Ordinal names the i-th secret given (from 0) in a local diagnosis.
func Ordinal(i int) string {
	names := []string{"first", "second", "third", "fourth", "fifth"}
	if i < len(names) {
		return names[i]
	}
	return "#" + strconv.Itoa(i+1)
}

// Deliveries returns every delivery answered so far, in order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Delivery, len(r.deliveries))
	copy(out, r.deliveries)
	return out
}
