package storage

import "time"

// Endpoint health (issue 30, item 4). Each endpoint keeps when its current
// streak of failed attempts began (WebhookEndpoint.FailingSince), written
// by RecordOutcomes in the transaction that records the attempts, and only
// when it changes: at a streak's first failure, at the success that ends
// it, and when the streak has lasted Outcome.DisableAfter and the endpoint
// is disabled. A disabled endpoint's pending jobs are held: no claim takes
// them until EnableWebhookEndpoint.

// ReasonFailing is the DisabledReason of an endpoint disabled because its
// every attempt failed for the disable period.
const ReasonFailing = "every attempt failed for the disable period"

// HealthChange is what a batch of recorded outcomes did to one endpoint's
// failing streak.
type HealthChange struct {
	Endpoint string
	// Reset: an attempt of the batch succeeded, ending the stored streak.
	Reset bool
	// Since is when the streak the batch leaves began, as far as the
	// batch knows: its first failure after its last success; zero when
	// its last attempt succeeded.
	Since time.Time
	// Last is the batch's last failure; zero as Since.
	Last time.Time
	// DisableAfter is the outcomes' Outcome.DisableAfter.
	DisableAfter time.Duration
}

// HealthChanges sums up the recorded outcomes (those for which recorded
// reports true) per endpoint, in the order of their first outcome. An
// attempt succeeded when its job was delivered.
func HealthChanges(outcomes []Outcome, recorded func(i int) bool) []HealthChange {
	var out []HealthChange
	at := map[string]int{}
	for i := range outcomes {
		o := &outcomes[i]
		if !recorded(i) || o.Job.EndpointID == "" {
			continue
		}
		k, ok := at[o.Job.EndpointID]
		if !ok {
			k = len(out)
			at[o.Job.EndpointID] = k
			out = append(out, HealthChange{Endpoint: o.Job.EndpointID})
		}
		c := &out[k]
		c.DisableAfter = o.DisableAfter
		t := Timestamp(o.Attempt.AttemptedAt)
		if o.Next == EventDelivered {
			c.Reset, c.Since, c.Last = true, time.Time{}, time.Time{}
			continue
		}
		if c.Since.IsZero() {
			c.Since = t
		}
		c.Last = t
	}
	return out
}

// ApplyHealth applies c to e and reports whether e changed (and must be
// written) and whether this disabled it.
func (e *WebhookEndpoint) ApplyHealth(c HealthChange) (changed, disabled bool) {
	if c.Reset && e.FailingSince != nil {
		e.FailingSince, changed = nil, true
	}
	if c.Since.IsZero() {
		return changed, false
	}
	if e.FailingSince == nil {
		s := c.Since
		e.FailingSince, changed = &s, true
	}
	if e.DisabledAt == nil && c.DisableAfter > 0 && !c.Last.Before(e.FailingSince.Add(c.DisableAfter)) {
		at := c.Last
		e.DisabledAt, e.DisabledReason = &at, ReasonFailing
		return true, true
	}
	return changed, false
}

// Disabled reports whether the endpoint is disabled: its jobs are held.
func (e *WebhookEndpoint) Disabled() bool { return e.DisabledAt != nil }
