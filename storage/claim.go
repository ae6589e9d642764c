package storage

import "time"

// Claim fairness is one rule for every backend (JobStore.ClaimJobs):
//
//   - each endpoint may take its allowance (ClaimRequest.AllowanceOf) of its
//     unleased jobs due by the claim's time, in due order;
//   - the endpoints take turns, one job each per turn, starting with the
//     first endpoint after ClaimRequest.After, until Max are taken or none
//     is left;
//   - NextDue is the earliest due time among the jobs left pending whose
//     endpoint may take more: the claim's time when such a job is due
//     already (Max was reached), zero when there is none.
//
// A backend supplies only what is its own: it reads each endpoint's head
// (ClaimHead, filled with ClaimHead.Takes) in endpoint order, and leases
// what PlanClaim picks from the heads.

// Allowance is how many jobs an endpoint that has leased jobs leased, by
// every owner together, may take in the claim r: Max, and no more than
// PerEndpoint less those already leased (never below zero).
func (r ClaimRequest) Allowance(leased int) int {
	if r.PerEndpoint <= 0 {
		return r.Max
	}
	return max(0, min(r.Max, r.PerEndpoint-leased))
}

// AllowanceOf is Allowance for endpoint, whose leases, every owner's
// together, number leased: the claiming owner's finished ones
// (ClaimRequest.Finished) are not counted. For a store only one owner
// claims from (Badger): a listed job recorded since the list was taken is
// uncounted twice, so a claim made meanwhile may allow a few jobs more,
// which that owner's own limit on attempts in flight bounds. A store
// several owners share counts leased without the listed jobs and calls
// Allowance instead.
func (r ClaimRequest) AllowanceOf(endpoint string, leased int) int {
	return r.Allowance(leased - min(leased, len(r.Finished[endpoint])))
}

// ClaimHead is one endpoint's unleased jobs as a claim reads them, in due
// order. K is how the backend names a job (a key, an id).
type ClaimHead[K any] struct {
	// Endpoint is the endpoint's id.
	Endpoint string
	// Allow is the endpoint's allowance (ClaimRequest.AllowanceOf).
	Allow int
	// Due holds the endpoint's first jobs, due by the claim's time; at
	// most Allow.
	Due []K
	// Next is the due time of the endpoint's first job not in Due; zero
	// when there is none.
	Next time.Time
}

// Takes reports whether the endpoint's next job in due order, due at due,
// joins Due (the caller appends it): it is due by now and the allowance
// has room. When it does not, due is the head's Next and the head is
// complete: Takes reports false from then on, and the backend may stop
// reading the endpoint's jobs.
func (h *ClaimHead[K]) Takes(due, now time.Time) bool {
	if !h.Next.IsZero() {
		return false
	}
	if due.After(now) || len(h.Due) >= h.Allow {
		h.Next = due
		return false
	}
	return true
}

// ClaimPlan is what a claim takes from the heads it read.
type ClaimPlan[K any] struct {
	// Jobs are the jobs to lease, in the order of the turns.
	Jobs []K
	// Taken is, per head (by index), how many of its due jobs Jobs holds.
	Taken []int
	// NextDue is the claim's ClaimResult.NextDue.
	NextDue time.Time
}

// PlanClaim picks the jobs the claim r takes from heads, which are in
// endpoint order, and tells the claim's NextDue.
func PlanClaim[K any](r ClaimRequest, heads []ClaimHead[K]) ClaimPlan[K] {
	plan := ClaimPlan[K]{Taken: make([]int, len(heads))}
	due := 0
	for i := range heads {
		due += len(heads[i].Due)
	}
	if want := min(due, r.Max); want > 0 {
		plan.Jobs = make([]K, 0, want)
	}
	start := 0
	for i := range heads {
		if heads[i].Endpoint > r.After {
			start = i
			break
		}
	}
	for progress := true; progress && len(plan.Jobs) < r.Max; {
		progress = false
		for n := range heads {
			i := (start + n) % len(heads)
			if plan.Taken[i] < len(heads[i].Due) && len(plan.Jobs) < r.Max {
				plan.Jobs = append(plan.Jobs, heads[i].Due[plan.Taken[i]])
				plan.Taken[i]++
				progress = true
			}
		}
	}
	for i := range heads {
		h := &heads[i]
		if plan.Taken[i] >= h.Allow {
			continue // the endpoint may take no more now
		}
		next := h.Next
		if plan.Taken[i] < len(h.Due) {
			next = r.Now // due, but Max was reached
		}
		if !next.IsZero() && (plan.NextDue.IsZero() || next.Before(plan.NextDue)) {
			plan.NextDue = next
		}
	}
	return plan
}
