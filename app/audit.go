package app

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rxgate/rxgate/storage"
)

// The audit trail (issue 27, item 3). One middleware on each listener
// (auditMiddleware: the partner API's authenticated routes, the operator
// API and the console) builds the entry of every request from its route
// (auditOperations) and its identity, so that no handler can forget one:
//
//   - a change (any method but GET and HEAD) carries the entry in its
//     request context (storage.WithAudit): the store appends it in the
//     change's own transaction, so a committed change always has its entry
//     and a change that failed has none from there;
//   - a read, and every request whose entry no transaction took (a refused
//     or failed change, one the backend writes without a transaction), is
//     recorded with its status after it is answered, into AuditTrail's
//     buffer, which its goroutine appends at most auditFlushEvery later.
//
// The read path's cost is a mutex-guarded append to a slice: no store
// round trip on the request.

// auditFlushEvery is how far behind the reads' entries may be: the
// documents promise at most one second.
const auditFlushEvery = 500 * time.Millisecond

// maxAuditBuffered bounds the entries waiting for the store. A store that
// cannot take them for long would otherwise hold every request's entry in
// memory; past the bound, entries are dropped and counted in the log, and
// the chain shows no gap (seq is assigned at append), so the log's count
// is the record of the loss.
const maxAuditBuffered = 200_000

// maxAuditBatch bounds the entries appended in one transaction.
const maxAuditBatch = 1000

// auditBufKeep bounds the capacity of a flushed buffer kept for reuse: the
// reads of a busy half second fit, and a backlog's giant buffer is let go.
// Reuse is what keeps Record from growing a fresh slice (and copying every
// entry so far) after each flush (BenchmarkPrescriptionPage's audited
// variants, profiled).
const auditBufKeep = 16 * maxAuditBatch

// AuditOptions configure an AuditTrail.
type AuditOptions struct {
	// Key signs the checkpoints.
	Key ed25519.PrivateKey
	// CheckpointEvery and CheckpointInterval: a checkpoint is signed after
	// this many entries, or this long after the last one while entries
	// are appended (audit.checkpoint_every, audit.checkpoint_interval).
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// FlushEvery is how often buffered entries are appended; 0 means
	// auditFlushEvery.
	FlushEvery time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// AuditTrail appends the entries of reads in batches and signs the
// checkpoints. Start starts its goroutine and Stop ends it, appending what
// is buffered first; the server's wiring (app/cli) owns both.
type AuditTrail struct {
	log  storage.AuditLog
	opts AuditOptions

	mu      sync.Mutex
	buf     []storage.AuditEntry
	dropped int
	// spare is the last flushed buffer, emptied, which the next flush
	// swaps in for buf; guarded by flushMu.
	spare []storage.AuditEntry

	// flushMu keeps Flush and the goroutine from appending at once, so
	// that batches go whole and in buffer order; it guards lastSeq and
	// lastAt, the last checkpoint's seq and time.
	flushMu sync.Mutex
	lastSeq uint64
	lastAt  time.Time

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewAuditTrail returns the trail of log; it appends nothing until Start.
func NewAuditTrail(log storage.AuditLog, opts AuditOptions) *AuditTrail {
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = auditFlushEvery
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CheckpointEvery <= 0 {
		opts.CheckpointEvery = 1000
	}
	return &AuditTrail{log: log, opts: opts, stop: make(chan struct{}), done: make(chan struct{}),
		buf: make([]storage.AuditEntry, 0, maxAuditBatch), spare: make([]storage.AuditEntry, 0, maxAuditBatch)}
}

// PublicKey is the public half of the checkpoints' key.
func (t *AuditTrail) PublicKey() ed25519.PublicKey {
	return t.opts.Key.Public().(ed25519.PublicKey)
}

// Log is the store the trail appends to.
func (t *AuditTrail) Log() storage.AuditLog { return t.log }

// Record buffers e for the next batch.
func (t *AuditTrail) Record(e storage.AuditEntry) {
	t.mu.Lock()
	if len(t.buf) < maxAuditBuffered {
		t.buf = append(t.buf, e)
	} else {
		t.dropped++
	}
	t.mu.Unlock()
}

// Start starts the goroutine that appends the buffer every FlushEvery and
// signs checkpoints.
func (t *AuditTrail) Start() {
	go t.run()
}

// Stop appends what is buffered, signs a last checkpoint and ends the
// goroutine; it returns ctx's error if that takes longer.
func (t *AuditTrail) Stop(ctx context.Context) error {
	t.once.Do(func() { close(t.stop) })
	select {
	case <-t.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (t *AuditTrail) run() {
	defer close(t.done)
	tick := time.NewTicker(t.opts.FlushEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.flushAndCheckpoint(ctx, true)
			cancel()
			return
		case <-tick.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.flushAndCheckpoint(ctx, false)
			cancel()
		}
	}
}

// Flush appends what is buffered now and signs a checkpoint when one is
// due (or, with force, whenever the chain moved since the last one).
func (t *AuditTrail) Flush(ctx context.Context) error {
	return t.flushAndCheckpoint(ctx, true)
}

func (t *AuditTrail) flushAndCheckpoint(ctx context.Context, force bool) error {
	t.flushMu.Lock()
	defer t.flushMu.Unlock()
	t.mu.Lock()
	batch, dropped := t.buf, t.dropped
	t.buf, t.dropped = t.spare[:0], 0
	t.mu.Unlock()
	t.spare = nil
	all := batch
	if dropped > 0 {
		t.opts.Logger.Error("audit entries dropped: the store did not take them in time", "dropped", dropped)
	}
	// In bounded transactions: a second's reads of a busy server are
	// many thousands of entries.
	for len(batch) > 0 {
		n := min(len(batch), maxAuditBatch)
		if err := t.log.AppendAudit(ctx, batch[:n]); err != nil {
			// Kept for the next round, before what came since.
			t.mu.Lock()
			t.buf = append(batch, t.buf...)
			t.mu.Unlock()
			t.opts.Logger.Warn("audit entries not appended yet; will retry", "entries", len(batch), "error", err)
			return err
		}
		batch = batch[n:]
	}
	if cap(all) <= auditBufKeep {
		clear(all) // the strings go with the entries
		t.spare = all[:0]
	}
	return t.checkpoint(ctx, force)
}

// checkpoint signs the chain's head when CheckpointEvery entries came
// since the last checkpoint, or CheckpointInterval passed with entries
// appended, or force and anything was appended. The head is read from the
// store: entries appended with changes, by this process or another
// replica, count too.
func (t *AuditTrail) checkpoint(ctx context.Context, force bool) error {
	seq, hash, err := t.log.AuditHead(ctx)
	if err != nil || seq == 0 || seq <= t.lastSeq {
		return err
	}
	now := t.opts.Now()
	due := force || seq-t.lastSeq >= uint64(t.opts.CheckpointEvery) ||
		(t.opts.CheckpointInterval > 0 && now.Sub(t.lastAt) >= t.opts.CheckpointInterval)
	if !due {
		return nil
	}
	if err := t.log.AddAuditCheckpoint(ctx, storage.SignAuditCheckpoint(t.opts.Key, seq, hash, false, now)); err != nil {
		t.opts.Logger.Warn("audit checkpoint not stored; will retry", "error", err)
		return err
	}
	t.lastSeq, t.lastAt = seq, now
	return nil
}

// PurgeBefore deletes the entries older than cutoff, storing a signed
// start marker where the retained chain begins (the hash of the last
// entry deleted, which the first kept one chains to), so that verify
// tells a purge from a removal. The newest entry is always kept: with no
// entry since cutoff nothing is purged, and the chain stays anchored to
// its checkpoints. It returns how many entries it deleted; the janitor
// calls it.
func (t *AuditTrail) PurgeBefore(ctx context.Context, cutoff time.Time) (int, error) {
	page, _, err := t.log.ListAudit(ctx, storage.AuditFilter{From: cutoff}, storage.PageRequest{Limit: 1})
	if err != nil || len(page) == 0 || page[0].Seq <= 1 {
		return 0, err
	}
	first := page[0]
	if first.Corrupt {
		// An unreadable entry's time and hash are unknown: no start
		// marker can be signed for it, and purging up to it would
		// destroy the evidence verify reports. The purge waits until an
		// operator has dealt with it.
		return 0, fmt.Errorf("audit: not purging: the entry at seq %d is unreadable (rxgate audit verify reports it)", first.Seq)
	}
	start := storage.SignAuditCheckpoint(t.opts.Key, first.Seq-1, first.PrevHash, true, t.opts.Now())
	return t.log.PurgeAudit(ctx, first.Seq, start)
}

// ctxAudit keys the request's pending entry in the echo context.
const ctxAudit = "rxgate.audit"

// auditMiddleware builds and records the entry of each audited route
// (auditOperations); other routes pass untouched.
func (a *App) auditMiddleware(kind string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if a.audit == nil {
				return next(c)
			}
			req := c.Request()
			method, path := req.Method, c.Path()
			if method == http.MethodHead {
				method = http.MethodGet
			}
			if kind == storage.AuditActorPartner {
				path = strings.TrimPrefix(path, a.cfg.HTTP.BasePath)
			}
			op := auditOps[auditRoute{method, path}]
			if op == "" {
				return next(c)
			}
			write := req.Method != http.MethodGet && req.Method != http.MethodHead
			// A read's pending entry never leaves this function (no
			// transaction holds it), so it is reused; a change's may stay in
			// the store's hands, so it is its own (BenchmarkPrescriptionPage,
			// audited: one allocation fewer on every read).
			var p *storage.AuditPending
			if write {
				p = new(storage.AuditPending)
			} else {
				p = auditPendingPool.Get().(*storage.AuditPending)
				defer func() {
					c.Set(ctxAudit, nil)
					p.Entry = storage.AuditEntry{}
					auditPendingPool.Put(p)
				}()
			}
			p.Entry = storage.AuditEntry{
				Time: a.now(), ActorKind: kind, Operation: op,
				PatientID: c.Param("patient_id"), Resource: auditResource(c),
			}
			if id, ok := c.Get(ctxRequestID).(string); ok {
				p.Entry.RequestID = id
			}
			if kind == storage.AuditActorPartner {
				p.Entry.OrgID = c.Param("organization_id")
			}
			c.Set(ctxAudit, p)
			if write {
				c.SetRequest(req.WithContext(storage.WithAudit(req.Context(), p)))
			}
			err := next(c)
			if p.Written() {
				return err
			}
			e := p.Entry
			switch {
			case err != nil:
				e.Outcome = toAPIError(err, a.validationStatus).Status
			case c.Response().Status != 0:
				e.Outcome = c.Response().Status
			default:
				e.Outcome = http.StatusOK
			}
			a.audit.Record(e)
			return err
		}
	}
}

// auditPendingPool holds the reads' pending entries between requests.
var auditPendingPool = sync.Pool{New: func() any { return new(storage.AuditPending) }}

// auditResource names the resource a route addresses, by id: the most
// specific path parameter other than the patient's.
func auditResource(c echo.Context) string {
	for _, name := range []string{"scid", "drug_id", "endpoint_id", "event_id", "key_id", "user_id", "organization_id", "partner_id"} {
		if v := c.Param(name); v != "" {
			return name + ":" + v
		}
	}
	return ""
}

// auditPartner records the partner API caller in the request's entry, once
// authentication knows it, before any handler writes.
func auditPartner(c echo.Context, partnerID, orgID, userID string) {
	if p, ok := c.Get(ctxAudit).(*storage.AuditPending); ok {
		p.Entry.PartnerID, p.Entry.OrgID, p.Entry.UserID = partnerID, orgID, userID
		// A user acting on its own paths: the path's user is the actor,
		// recorded once (every read's entry is written, byte by byte).
		if id, ok := strings.CutPrefix(p.Entry.Resource, "user_id:"); ok && id == userID {
			p.Entry.Resource = ""
		}
	}
}

// auditOperator records the operator key in the request's entry.
func auditOperator(c echo.Context, id *operatorIdentity) {
	if p, ok := c.Get(ctxAudit).(*storage.AuditPending); ok && id != nil {
		p.Entry.OperatorName, p.Entry.OperatorRole = id.Name, id.Role
	}
}

// auditRoute is a route by method and path.
type auditRoute struct{ method, path string }

// auditOps is auditOperations by auditRoute: looked up on every request
// without building a string.
var auditOps = func() map[auditRoute]string {
	m := make(map[auditRoute]string, len(auditOperations))
	for k, op := range auditOperations {
		method, path, _ := strings.Cut(k, " ")
		m[auditRoute{method, path}] = op
	}
	return m
}()

// auditOperations names the operation of every audited route, by method
// and route path. Every authenticated route of both listeners and every
// console page is here (TestAuditEveryRoute); health, documents, metrics
// and the console's static files and sign-in are not operations on data.
var auditOperations = map[string]string{
	// Partner API.
	"GET /v1/organizations/:organization_id/validate":                                          "organization.validate",
	"GET /v1/organizations/:organization_id/users":                                             "users.list",
	"POST /v1/organizations/:organization_id/custom-drugs":                                     "custom_drugs.bulk_create",
	"GET /v1/organizations/:organization_id/users/:user_id":                                    "user.get",
	"PUT /v1/organizations/:organization_id/users/:user_id/disable":                            "user.disable",
	"PUT /v1/organizations/:organization_id/users/:user_id/enable":                             "user.enable",
	"POST /v1/organizations/:organization_id/users/:user_id/patients":                          "patient.create",
	"PUT /v1/organizations/:organization_id/users/:user_id/patients/:patient_id":               "patient.update",
	"GET /v1/organizations/:organization_id/users/:user_id/patients/:patient_id/prescriptions": "prescriptions.list",
	"GET /v1/organizations/:organization_id/users/:user_id/custom-drugs":                       "custom_drugs.list",
	"POST /v1/organizations/:organization_id/users/:user_id/custom-drugs":                      "custom_drug.create",
	"PUT /v1/organizations/:organization_id/users/:user_id/custom-drugs/:drug_id":              "custom_drug.update",
	"DELETE /v1/organizations/:organization_id/users/:user_id/custom-drugs/:drug_id":           "custom_drug.delete",

	// Operator API.
	"POST /admin/v1/partners":                                                                                "operator.partners.create",
	"GET /admin/v1/partners":                                                                                 "operator.partners.list",
	"POST /admin/v1/partners/:partner_id/rotate-secret":                                                      "operator.partners.rotate_secret",
	"POST /admin/v1/organizations":                                                                           "operator.organizations.create",
	"GET /admin/v1/organizations":                                                                            "operator.organizations.list",
	"GET /admin/v1/organizations/:organization_id":                                                           "operator.organizations.get",
	"GET /admin/v1/organizations/:organization_id/users":                                                     "operator.users.list",
	"POST /admin/v1/organizations/:organization_id/rotate-secret":                                            "operator.organizations.rotate_secret",
	"POST /admin/v1/organizations/:organization_id/users":                                                    "operator.users.create",
	"GET /admin/v1/organizations/:organization_id/users/:user_id":                                            "operator.users.get",
	"POST /admin/v1/organizations/:organization_id/users/:user_id/patients":                                  "operator.patients.create",
	"GET /admin/v1/organizations/:organization_id/users/:user_id/patients/:patient_id":                       "operator.patients.get",
	"POST /admin/v1/organizations/:organization_id/users/:user_id/patients/:patient_id/prescriptions":        "operator.prescriptions.create",
	"PATCH /admin/v1/organizations/:organization_id/users/:user_id/patients/:patient_id/prescriptions/:scid": "operator.prescriptions.update",
	"POST /admin/v1/tokens":                                                                                  "operator.tokens.mint",
	"POST /admin/v1/webhook-endpoints":                                                                       "operator.endpoints.create",
	"GET /admin/v1/webhook-endpoints":                                                                        "operator.endpoints.list",
	"GET /admin/v1/webhook-endpoints/:endpoint_id":                                                           "operator.endpoints.get",
	"PATCH /admin/v1/webhook-endpoints/:endpoint_id":                                                         "operator.endpoints.update",
	"DELETE /admin/v1/webhook-endpoints/:endpoint_id":                                                        "operator.endpoints.delete",
	"POST /admin/v1/sandbox/clock":                                                                           "operator.sandbox.clock",
	"POST /admin/v1/webhook-endpoints/:endpoint_id/rotate-secret":                                            "operator.endpoints.rotate_secret",
	"POST /admin/v1/webhook-endpoints/:endpoint_id/diagnose":                                                 "operator.endpoints.diagnose",
	"POST /admin/v1/webhook-endpoints/:endpoint_id/test":                                                     "operator.endpoints.test",
	"POST /admin/v1/webhook-endpoints/:endpoint_id/enable":                                                   "operator.endpoints.enable",
	"POST /admin/v1/webhook-endpoints/:endpoint_id/recover":                                                  "operator.endpoints.recover",
	"GET /admin/v1/events":                                                                                   "operator.events.list",
	"GET /admin/v1/events/:event_id":                                                                         "operator.events.get",
	"POST /admin/v1/events/:event_id/replay":                                                                 "operator.events.replay",
	"GET /admin/v1/backup":                                                                                   "operator.backup.download",
	"GET /admin/v1/overview":                                                                                 "operator.overview",
	"POST /admin/v1/operator-keys":                                                                           "operator.keys.create",
	"GET /admin/v1/operator-keys":                                                                            "operator.keys.list",
	"POST /admin/v1/operator-keys/:key_id/revoke":                                                            "operator.keys.revoke",
	"GET /admin/v1/audit":                                                                                    "operator.audit.list",
	"GET /admin/v1/audit/checkpoints":                                                                        "operator.audit.checkpoints",

	// Console (its HEADs are GETs).
	"GET /console/":                                      "console.overview",
	"GET /console/organizations":                         "console.organizations.list",
	"GET /console/organizations/:organization_id":        "console.organizations.get",
	"GET /console/endpoints":                             "console.endpoints.list",
	"POST /console/endpoints":                            "console.endpoints.create",
	"POST /console/endpoints/:endpoint_id/rotate-secret": "console.endpoints.rotate_secret",
	"GET /console/endpoints/:endpoint_id/diagnose":       "console.endpoints.diagnose_form",
	"POST /console/endpoints/:endpoint_id/diagnose":      "console.endpoints.diagnose",
	"POST /console/endpoints/:endpoint_id/test":          "console.endpoints.test",
	"POST /console/endpoints/:endpoint_id/enable":        "console.endpoints.enable",
	"POST /console/endpoints/:endpoint_id/recover":       "console.endpoints.recover",
	"GET /console/endpoints/secret":                      "console.endpoints.secret",
	"GET /console/endpoints/:endpoint_id/delete":         "console.endpoints.delete_confirm",
	"POST /console/endpoints/:endpoint_id/delete":        "console.endpoints.delete",
	"GET /console/events":                                "console.events.list",
	"GET /console/events/:event_id":                      "console.events.get",
	"POST /console/events/:event_id/replay":              "console.events.replay",
	"POST /console/sandbox/clock":                        "console.sandbox.clock",
	"GET /console/audit":                                 "console.audit.list",
}
