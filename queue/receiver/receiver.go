// Package receiver is a webhook receiver written from spec section 6.4
// alone: it verifies each delivery's signature with queue/signature and
// answers 200, or 400 when the signature does not verify (6.4.4). `rxgate
// listen` serves it, and the tests' receivers are built on it.
package receiver

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rxgate/rxgate/queue/signature"
)

// DefaultMaxBody bounds the body read from one delivery.
const DefaultMaxBody = 1 << 20

// Delivery is one request the receiver answered.
type Delivery struct {
	ReceivedAt time.Time
	// EventID is the X-Webhook-Id header.
	EventID string
	// Signature is the X-Webhook-Signature header.
	Signature string
	Header    http.Header
	Body      []byte
	// Err is why the delivery was rejected; nil when it verified.
	Err error
	// Status is the status answered.
	Status int
}

// Receiver is an http.Handler for deliveries at any path. It is safe for
// concurrent use once serving.
type Receiver struct {
	// Secrets are the webhook secrets a delivery may be signed with (two
	// while a rotation's grace period runs).
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
		d.Err = signature.Verify(r.Secrets, d.Signature, body, d.ReceivedAt)
		d.Status = http.StatusOK
		if d.Err != nil {
			d.Status = http.StatusBadRequest
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

// Deliveries returns every delivery answered so far, in order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Delivery, len(r.deliveries))
	copy(out, r.deliveries)
	return out
}
