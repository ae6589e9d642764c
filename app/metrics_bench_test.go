package app

import (
	"testing"
	"time"
)

// BenchmarkObserveRequest is what metrics add to every request: its
// counter and histogram, and a token check.
func BenchmarkObserveRequest(b *testing.B) {
	m := NewMetrics()
	for b.Loop() {
		m.observeRequest(apiPartner, "/external/v1/organizations/:organization_id/users/:user_id/patients/:patient_id/prescriptions", "GET", 200, time.Millisecond)
		m.observeToken("cache_hit")
	}
}
