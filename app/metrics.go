package app

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rxgate/rxgate/app/auth"
	"github.com/rxgate/rxgate/queue"
	"github.com/rxgate/rxgate/storage"
)

// Metrics are the server's Prometheus metrics, served at GET /metrics on
// the operator listener. No label holds an id, a token, a secret or
// patient data: labels are fixed words, status codes and route templates.
type Metrics struct {
	reg *prometheus.Registry

	httpRequests     *prometheus.CounterVec
	httpDuration     *prometheus.HistogramVec
	deliveries       *prometheus.CounterVec
	deliveryDuration prometheus.Histogram
	tokens           *prometheus.CounterVec
	events           *prometheus.CounterVec
	backupSuccess    prometheus.Gauge
	backupFailures   prometheus.Counter
	endpointsOff     prometheus.Counter

	// requestSeries caches each label set's series (requestKey ->
	// *requestSeries), so that a request costs no label hashing.
	requestSeries sync.Map
	tokenSeries   map[string]prometheus.Counter // result -> its counter; read-only after NewMetrics
	eventSeries   map[string]prometheus.Counter // status -> its counter; read-only after NewMetrics

	// What the operator's overview shows beside the store's counts: the
	// job store (set by WatchStore), this process's deliveries of the last
	// hour, and the last scheduled backup.
	jobs       storage.JobStore
	recent     deliveryWindow
	lastBackup atomic.Int64 // Unix nanoseconds; 0 before the first
}

type requestKey struct {
	api, route, method string
	status             int
}

type requestSeries struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// NewMetrics registers rxgate's metrics and the Go runtime and process
// collectors in a registry of their own.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rxgate_http_requests_total",
			Help: "HTTP requests answered, by API (partner or admin), route template, method and status.",
		}, []string{"api", "route", "method", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "rxgate_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by API and route template.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"api", "route"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rxgate_webhook_deliveries_total",
			Help: "Webhook delivery attempts recorded, by outcome: delivered, retry (it will be attempted again) or failed (permanently).",
		}, []string{"outcome"}),
		deliveryDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "rxgate_webhook_delivery_duration_seconds",
			Help:    "Duration of webhook delivery attempts, from the request to the receiver's answer or the timeout.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rxgate_token_verifications_total",
			Help: "Bearer tokens checked, by result: cache_hit, verified or refused.",
		}, []string{"result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rxgate_events_total",
			Help: "prescription.created events written, by their status when written: pending (to be delivered) or skipped.",
		}, []string{"status"}),
	}
	m.backupSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rxgate_backup_last_success_timestamp_seconds",
		Help: "When the last scheduled backup succeeded, in Unix seconds; 0 before the first.",
	})
	m.backupFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rxgate_backup_failures_total",
		Help: "Scheduled backups that failed.",
	})
	m.endpointsOff = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "rxgate_webhook_endpoints_disabled_total",
		Help: "Webhook endpoints this process disabled because their every attempt failed for webhooks.disable_after.",
	})
	m.reg.MustRegister(m.backupSuccess, m.backupFailures, m.endpointsOff)
	m.reg.MustRegister(m.httpRequests, m.httpDuration, m.deliveries, m.deliveryDuration, m.tokens, m.events,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The token results always exist, so that a rate over them starts at 0.
	m.tokenSeries = map[string]prometheus.Counter{}
	for _, r := range []string{auth.ResultCacheHit, auth.ResultVerified, auth.ResultRefused} {
		m.tokenSeries[r] = m.tokens.WithLabelValues(r)
	}
	m.eventSeries = map[string]prometheus.Counter{}
	for _, st := range []string{storage.EventPending, storage.EventSkipped} {
		m.eventSeries[st] = m.events.WithLabelValues(st)
	}
	for _, o := range []string{"delivered", "retry", "failed"} {
		m.deliveries.WithLabelValues(o)
	}
	return m
}

// WatchStore adds the store's gauges: the webhook jobs by state, how long
// the most overdue pending job has waited, and, when the backend reports
// them, its size on disk and (PostgreSQL) its counters of pool resets and
// unconfirmed commits after a primary switch. They are read at each
// scrape.
func (m *Metrics) WatchStore(jobs storage.JobStore, now func() time.Time) {
	m.jobs = jobs
	m.reg.MustRegister(&storeCollector{jobs: jobs, now: now})
}

// storeCollector reads the job store at each scrape.
type storeCollector struct {
	jobs storage.JobStore
	now  func() time.Time
}

var (
	descJobs = prometheus.NewDesc("rxgate_webhook_jobs",
		"Webhook delivery jobs in the store, by state: pending or leased (being attempted). On PostgreSQL a figure beyond 10000 is an estimate from the database's statistics (rxgate_webhook_jobs_estimated).", []string{"state"}, nil)
	descJobsEstimated = prometheus.NewDesc("rxgate_webhook_jobs_estimated",
		"1 when rxgate_webhook_jobs is an estimate from the database's statistics (PostgreSQL, beyond 10000 jobs), else 0.", nil, nil)
	descOldest = prometheus.NewDesc("rxgate_webhook_oldest_pending_seconds",
		"How long the most overdue pending webhook job has been due; 0 when none is due.", nil, nil)
	descSize = prometheus.NewDesc("rxgate_store_size_bytes",
		"The store's size on disk, by part: lsm (the index and small values) or vlog (the value log).", []string{"part"}, nil)
	descDisabled = prometheus.NewDesc("rxgate_webhook_endpoints_disabled",
		"Webhook endpoints disabled now: their deliveries are held until they are enabled.", nil, nil)
	descPoolResets = prometheus.NewDesc("rxgate_postgres_pool_resets_total",
		"Times this process dropped every pooled PostgreSQL connection because one showed the primary had switched (a read-only answer, a shutdown, a lost or refused connection); at most one a second. A rise is a failover or a restart of the database.", nil, nil)
	descUnconfirmed = prometheus.NewDesc("rxgate_postgres_unconfirmed_commits_total",
		"Commits the synchronous standby did not confirm (PostgreSQL cancelled the wait and warned), answered 503 rather than acknowledged.", nil, nil)
	descScrapeErrors = prometheus.NewDesc("rxgate_store_scrape_errors",
		"1 when the store could not be read for this scrape, else 0.", nil, nil)
)

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descJobs
	ch <- descJobsEstimated
	ch <- descOldest
	ch <- descSize
	ch <- descScrapeErrors
	ch <- descDisabled
	ch <- descPoolResets
	ch <- descUnconfirmed
}

// endpointLister is the part of storage.Store the disabled gauge reads;
// every backend's job store is one.
type endpointLister interface {
	ListWebhookEndpoints(ctx context.Context, partnerID string) ([]storage.WebhookEndpoint, error)
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.jobs.JobStats(ctx)
	failed := 0.0
	if err != nil {
		failed = 1
	} else {
		oldest := 0.0
		if !st.OldestDue.IsZero() {
			oldest = max(0, c.now().Sub(st.OldestDue).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(st.Pending), "pending")
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(st.Leased), "leased")
		estimated := 0.0
		if st.Estimated {
			estimated = 1
		}
		ch <- prometheus.MustNewConstMetric(descJobsEstimated, prometheus.GaugeValue, estimated)
		ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, oldest)
	}
	if l, ok := c.jobs.(endpointLister); ok {
		// A single-tenant deployment has few endpoints: reading them all
		// at a scrape is cheap beside the job stats.
		if eps, err := l.ListWebhookEndpoints(ctx, ""); err != nil {
			failed = 1
		} else {
			n := 0
			for i := range eps {
				if eps[i].Disabled() {
					n++
				}
			}
			ch <- prometheus.MustNewConstMetric(descDisabled, prometheus.GaugeValue, float64(n))
		}
	}
	ch <- prometheus.MustNewConstMetric(descScrapeErrors, prometheus.GaugeValue, failed)
	if f := storage.CapabilitiesOf(c.jobs).Failover; f != nil {
		n := f.FailoverCounts()
		ch <- prometheus.MustNewConstMetric(descPoolResets, prometheus.CounterValue, float64(n.PoolResets))
		ch <- prometheus.MustNewConstMetric(descUnconfirmed, prometheus.CounterValue, float64(n.UnconfirmedCommits))
	}
	if s := storage.CapabilitiesOf(c.jobs).Size; s != nil {
		lsm, vlog := s.Size()
		ch <- prometheus.MustNewConstMetric(descSize, prometheus.GaugeValue, float64(lsm), "lsm")
		ch <- prometheus.MustNewConstMetric(descSize, prometheus.GaugeValue, float64(vlog), "vlog")
	}
}

// ObserveDelivery counts one recorded attempt; it is the queue's Observe.
func (m *Metrics) ObserveDelivery(r queue.Result) {
	m.deliveries.WithLabelValues(r.Outcome).Inc()
	if r.Disabled != nil {
		m.endpointsOff.Inc()
	}
	m.deliveryDuration.Observe(float64(r.Attempt.DurationMS) / 1000)
	at := r.Attempt.AttemptedAt
	if at.IsZero() {
		at = time.Now()
	}
	m.recent.add(at, r.Outcome)
}

// observeToken counts one token check (auth.Result* words).
func (m *Metrics) observeToken(result string) {
	if c, ok := m.tokenSeries[result]; ok {
		c.Inc()
	}
}

// ObserveBackup records a scheduled backup's result; it is the janitor's
// OnBackup.
func (m *Metrics) ObserveBackup(at time.Time, err error) {
	if err != nil {
		m.backupFailures.Inc()
		return
	}
	m.backupSuccess.Set(float64(at.Unix()))
	m.lastBackup.Store(at.UnixNano())
}

// observeEvent counts one event written with status.
func (m *Metrics) observeEvent(status string) {
	if c, ok := m.eventSeries[status]; ok {
		c.Inc()
	}
}

// observeRequest counts one answered request. route and method come from
// fixed sets (the route table, knownMethods), so the cache stays small.
func (m *Metrics) observeRequest(api, route, method string, status int, took time.Duration) {
	k := requestKey{api: api, route: route, method: method, status: status}
	v, ok := m.requestSeries.Load(k)
	if !ok {
		v, _ = m.requestSeries.LoadOrStore(k, &requestSeries{
			count:    m.httpRequests.WithLabelValues(api, route, method, strconv.Itoa(status)),
			duration: m.httpDuration.WithLabelValues(api, route),
		})
	}
	s := v.(*requestSeries)
	s.count.Inc()
	s.duration.Observe(took.Seconds())
}

// handler serves the registry in the Prometheus text format.
func (m *Metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// deliveryWindow counts recorded attempts by outcome per minute over the
// last hour, in a ring of minutes.
type deliveryWindow struct {
	mu      sync.Mutex
	minutes [60]deliveryMinute
}

type deliveryMinute struct {
	minute                   int64 // Unix minute the counts are for
	delivered, retry, failed int
}

func (w *deliveryWindow) add(at time.Time, outcome string) {
	minute := at.Unix() / 60
	w.mu.Lock()
	defer w.mu.Unlock()
	b := &w.minutes[((minute%60)+60)%60]
	if b.minute != minute {
		*b = deliveryMinute{minute: minute}
	}
	switch outcome {
	case "delivered":
		b.delivered++
	case "retry":
		b.retry++
	case "failed":
		b.failed++
	}
}

// lastHour sums the minutes of the hour up to now.
func (w *deliveryWindow) lastHour(now time.Time) DeliveryCounts {
	current := now.Unix() / 60
	w.mu.Lock()
	defer w.mu.Unlock()
	var c DeliveryCounts
	for _, b := range w.minutes {
		if b.minute > current-60 && b.minute <= current {
			c.Delivered += b.delivered
			c.Retry += b.retry
			c.Failed += b.failed
		}
	}
	return c
}
