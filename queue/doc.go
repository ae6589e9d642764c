// Package queue delivers webhook events (spec sections 3.3, 6.3 and 6.4)
// from the persistent retry queue of a storage.JobStore.
//
// The job store owns the jobs, their leases and the events (storage's
// JobStore contract, met by every backend); this package is the behaviour
// around them: a dispatcher that claims due jobs under a lease and keeps
// the leases it holds renewed, a pool of workers that sign and POST each
// event, the backoff between attempts, and an ordered Stop. It knows no
// backend and no configuration file: main builds its Options.
//
// Failure policy, per attempt (table 3.3): a 2xx answer within the timeout
// delivers the event to that endpoint; a network error, a timeout, 408, 429
// or any 5xx is retried after an exponential backoff with jitter (a
// Retry-After is honoured up to webhooks.backoff_max) while fewer than
// webhooks.max_attempts attempts were made; any other status (other 4xx,
// 3xx: redirects are not followed) fails the delivery permanently at once.
// Every attempt, 429 included, counts. A permanently failed delivery is
// logged and never re-sent unless the operator replays the event. A
// connection to an address Destinations refuses (loopback, private,
// link-local and other non-public addresses, judged after name
// resolution) is never attempted: the attempt is recorded with the one
// error DestinationNotAllowed and retried like a network error.
//
// Delivery is at least once. An attempt's outcome and the job's next state
// are committed in one transaction after the answer arrives (one recorder
// goroutine writes the outcomes that arrive meanwhile together:
// JobStore.RecordOutcomes); an attempt in flight when the process dies left
// its job leased, and the lease is taken back once it has expired
// (JobStore.ReclaimExpired, at Start and every third of a lease), or at once
// where the store can prove its owner dead (the embedded store, whose
// leases live in its process's memory, after a restart). Receivers must
// therefore be idempotent by event_id, as spec 6.3 says.
//
// Fairness: endpoints take turns in each claim (the store's claim is the one
// place that rule lives), one endpoint has at most half the workers
// (rounded up) in flight, and the last free worker goes only to an endpoint
// with nothing in flight, so a slow or hanging endpoint ties up only its own
// attempts and its backlog never starves another endpoint. The store bounds
// the jobs one endpoint has leased, by every queue together.
//
// Signature timestamps: the signature header is computed for each attempt
// at the moment it is sent, so t is always fresh (a retry or a replay
// carries a new t over the same bytes) and a delivery retried after more
// than 300 seconds still verifies.
package queue
