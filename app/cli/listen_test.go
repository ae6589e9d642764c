package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rxgate/rxgate/queue/receiver"
	"github.com/rxgate/rxgate/queue/signature"
)

// TestPrintDeliveryExplains: a delivery with a diagnosis is printed with
// one "why:" line per finding, naming its classes.
func TestPrintDeliveryExplains(t *testing.T) {
	t.Parallel()
	now := time.Unix(1767225600, 0)
	body := []byte(`{"event_type":"prescription.created","event_id":"e1"}`)
	header := signature.Header(now, body, "secret")
	received := append(append([]byte{}, body...), '\n')
	diag := signature.Diagnose(signature.Input{Header: header, Body: received, Now: now,
		Secrets: []signature.Secret{{ID: receiver.Ordinal(0), Value: "secret"}}})
	var out bytes.Buffer
	printDelivery(&out, receiver.Delivery{ReceivedAt: now, Status: 400, EventID: "e1", Body: received,
		Err: signature.ErrSignatureMismatch, Diagnosis: &diag})
	assert.Contains(t, out.String(), "rejected: signature: no signature matches")
	assert.Contains(t, out.String(), "  why: [body_differs (trailing_newline)] The body differs from what the signature covers: it verifies with the trailing newline removed, with the first secret.")
	assert.NotContains(t, out.String(), `"secret"`)
}
