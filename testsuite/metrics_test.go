package testsuite_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite"
)

// uuidLike matches anything that looks like an id: a label value must
// never hold one.
var uuidLike = regexp.MustCompile(`(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}`)

// scrape reads GET /metrics with the operator key and parses it with the
// Prometheus text parser.
func scrape(t *testing.T, env *testsuite.Env) map[string]*dto.MetricFamily {
	t.Helper()
	r := env.Do(t, testsuite.Request{URL: env.AdminPath("/metrics"), Token: env.AdminKey})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(r.Body))
	require.NoError(t, err, "the exposition parses")
	return families
}

// sample returns the value of family's sample whose labels include want,
// summed over the samples that match; ok is false when none does.
func sample(families map[string]*dto.MetricFamily, name string, want map[string]string) (sum float64, ok bool) {
	f := families[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		ok = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, ok
}

// TestMetrics: /metrics needs the operator key; after real traffic (partner
// calls with a token twice, an unknown path holding an id, a prescription
// delivered to a receiver) the counters moved, the store's gauges and the
// runtime collectors are there, and no label value holds an id.
func TestMetrics(t *testing.T) {
	t.Parallel()
	env := startWebhooks(t)
	r := env.Do(t, testsuite.Request{URL: env.AdminPath("/metrics")})
	require.Equal(t, http.StatusUnauthorized, r.Status, "without the operator key")

	tn := env.NewTenant(t)
	validate(t, env, tn)
	rcv := newLoadReceiver()
	srv := httptest.NewServer(rcv)
	t.Cleanup(srv.Close)
	_, secret := registerEndpoint(t, env, tn.PartnerID, srv.URL+"/")
	rcv.secret.Store(secret)
	before := scrape(t, env)

	token := tn.Token(t, testsuite.RoleOwner)
	for range 2 {
		r := env.Do(t, testsuite.Request{URL: tn.ValidatePath(), Token: token, Headers: tn.Headers()})
		require.Equal(t, http.StatusOK, r.Status)
	}
	r = env.Do(t, testsuite.Request{URL: "/v1/organizations/" + tn.OrgID + "/no-such-thing", Token: token, Headers: tn.Headers()})
	require.Equal(t, http.StatusNotFound, r.Status)
	scid := prescribe(t, env, tn)
	require.Eventually(t, func() bool {
		_, ok := rcv.receipt(scid)
		return ok
	}, 30*time.Second, 10*time.Millisecond, "the event is delivered")
	var after map[string]*dto.MetricFamily
	require.Eventually(t, func() bool { // the outcome is recorded after the receipt
		after = scrape(t, env)
		n, _ := sample(after, "rxgate_webhook_deliveries_total", map[string]string{"outcome": "delivered"})
		return n >= 1
	}, 30*time.Second, 20*time.Millisecond, "the delivery is counted")

	moved := func(name string, labels map[string]string, by float64) {
		t.Helper()
		was, _ := sample(before, name, labels)
		now, ok := sample(after, name, labels)
		require.True(t, ok, "%s%v is exposed", name, labels)
		assert.GreaterOrEqual(t, now-was, by, "%s%v moved", name, labels)
	}
	moved("rxgate_http_requests_total", map[string]string{"api": "partner", "route": env.Config.HTTP.BasePath + "/v1/organizations/:organization_id/validate", "method": "GET", "status": "200"}, 2)
	moved("rxgate_http_requests_total", map[string]string{"api": "partner", "route": "unmatched", "status": "404"}, 1)
	moved("rxgate_http_requests_total", map[string]string{"api": "admin", "status": "201"}, 1)
	moved("rxgate_http_request_duration_seconds", map[string]string{"api": "partner"}, 3)
	moved("rxgate_token_verifications_total", map[string]string{"result": "verified"}, 1)
	moved("rxgate_token_verifications_total", map[string]string{"result": "cache_hit"}, 1)
	moved("rxgate_webhook_deliveries_total", map[string]string{"outcome": "delivered"}, 1)
	moved("rxgate_events_total", map[string]string{"status": "pending"}, 1)
	moved("rxgate_webhook_delivery_duration_seconds", nil, 1)
	exposed := []string{"rxgate_webhook_jobs", "rxgate_webhook_jobs_estimated", "rxgate_webhook_oldest_pending_seconds", "go_goroutines", "process_resident_memory_bytes"}
	if !testsuite.OnPostgres() {
		exposed = append(exposed, "rxgate_store_size_bytes") // Badger's own files; PostgreSQL reports its own
	} else {
		exposed = append(exposed, "rxgate_postgres_pool_resets_total", "rxgate_postgres_unconfirmed_commits_total")
	}
	for _, name := range exposed {
		_, ok := sample(after, name, nil)
		assert.True(t, ok, "%s is exposed", name)
	}
	for name, f := range after {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				assert.False(t, uuidLike.MatchString(l.GetValue()), "%s{%s=%q} holds an id", name, l.GetName(), l.GetValue())
			}
		}
	}
}
