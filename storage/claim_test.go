package storage_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

func TestClaimAllowance(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                     string
		max, perEndpoint, leased int
		want                     int
	}{
		{name: "no limit", max: 10, perEndpoint: 0, leased: 50, want: 10},
		{name: "negative limit is none", max: 10, perEndpoint: -1, leased: 3, want: 10},
		{name: "limit above max", max: 10, perEndpoint: 20, leased: 0, want: 10},
		{name: "limit less leased", max: 10, perEndpoint: 8, leased: 5, want: 3},
		{name: "limit reached", max: 10, perEndpoint: 8, leased: 8, want: 0},
		{name: "over the limit", max: 10, perEndpoint: 8, leased: 9, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := storage.ClaimRequest{Max: tt.max, PerEndpoint: tt.perEndpoint}
			require.Equal(t, tt.want, r.Allowance(tt.leased))
		})
	}
}

func TestClaimAllowanceOf(t *testing.T) {
	t.Parallel()
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprint("job-", i)
		}
		return out
	}
	r := storage.ClaimRequest{Max: 10, PerEndpoint: 8, Finished: map[string][]string{"a": ids(3), "b": ids(20), "c": nil}}
	require.Equal(t, 3, r.AllowanceOf("a", 8), "a's three finished jobs are uncounted")
	require.Equal(t, 0, r.AllowanceOf("x", 8), "an endpoint with none finished counts every lease")
	require.Equal(t, 8, r.AllowanceOf("b", 5), "more finished than leased uncounts the leases, no more")
	require.Equal(t, 1, r.AllowanceOf("c", 7), "an empty list uncounts nothing")
	require.Equal(t, 10, storage.ClaimRequest{Max: 10, Finished: map[string][]string{"a": ids(3)}}.AllowanceOf("a", 50), "no limit")
}

func TestClaimHeadTakes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	h := storage.ClaimHead[string]{Endpoint: "e", Allow: 2}
	for _, id := range []string{"a", "b"} {
		require.True(t, h.Takes(now.Add(-time.Second), now), "due and room: %s", id)
		h.Due = append(h.Due, id)
	}
	require.False(t, h.Takes(now.Add(-time.Millisecond), now), "the allowance is full")
	require.Equal(t, now.Add(-time.Millisecond), h.Next, "the first job not taken is the next")
	require.False(t, h.Takes(now.Add(-time.Hour), now), "the head is complete")
	require.Equal(t, now.Add(-time.Millisecond), h.Next, "the next stays")

	late := storage.ClaimHead[string]{Endpoint: "e", Allow: 5}
	require.True(t, late.Takes(now, now), "due exactly now")
	require.False(t, late.Takes(now.Add(time.Nanosecond), now), "not due yet")
	require.Equal(t, now.Add(time.Nanosecond), late.Next)

	none := storage.ClaimHead[string]{Endpoint: "e", Allow: 0}
	require.False(t, none.Takes(now.Add(-time.Hour), now), "no allowance")
	require.Equal(t, now.Add(-time.Hour), none.Next)
}

func TestPlanClaim(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	later := now.Add(time.Minute)
	head := func(endpoint string, allow int, next time.Time, due ...string) storage.ClaimHead[string] {
		return storage.ClaimHead[string]{Endpoint: endpoint, Allow: allow, Due: due, Next: next}
	}
	tests := []struct {
		name    string
		after   string
		max     int
		heads   []storage.ClaimHead[string]
		want    []string
		taken   []int
		nextDue time.Time
	}{
		{name: "nothing pending", max: 5, heads: nil, want: nil, taken: []int{}},
		{
			name: "turns from the first endpoint", max: 5,
			heads: []storage.ClaimHead[string]{head("a", 5, time.Time{}, "a1", "a2", "a3"), head("b", 5, time.Time{}, "b1")},
			want:  []string{"a1", "b1", "a2", "a3"}, taken: []int{3, 1},
		},
		{
			name: "turns start after After", after: "a", max: 3,
			heads: []storage.ClaimHead[string]{head("a", 5, time.Time{}, "a1", "a2"), head("b", 5, time.Time{}, "b1", "b2"), head("c", 5, time.Time{}, "c1")},
			want:  []string{"b1", "c1", "a1"}, taken: []int{1, 1, 1}, nextDue: now,
		},
		{
			name: "After between endpoints", after: "bb", max: 10,
			heads: []storage.ClaimHead[string]{head("a", 5, time.Time{}, "a1"), head("b", 5, time.Time{}, "b1"), head("c", 5, time.Time{}, "c1")},
			want:  []string{"c1", "a1", "b1"}, taken: []int{1, 1, 1},
		},
		{
			name: "After past the last endpoint wraps around", after: "z", max: 10,
			heads: []storage.ClaimHead[string]{head("a", 5, time.Time{}, "a1"), head("b", 5, time.Time{}, "b1")},
			want:  []string{"a1", "b1"}, taken: []int{1, 1},
		},
		{
			name: "next due of an endpoint with room", max: 10,
			heads: []storage.ClaimHead[string]{head("a", 5, later, "a1"), head("b", 5, later.Add(time.Hour))},
			want:  []string{"a1"}, taken: []int{1, 0}, nextDue: later,
		},
		{
			name: "an endpoint at its allowance gives no next due", max: 10,
			heads: []storage.ClaimHead[string]{head("a", 1, now.Add(-time.Hour), "a1"), head("b", 5, later)},
			want:  []string{"a1"}, taken: []int{1, 0}, nextDue: later,
		},
		{
			name: "an endpoint with no allowance", max: 10,
			heads: []storage.ClaimHead[string]{head("a", 0, now.Add(-time.Hour)), head("b", 2, time.Time{}, "b1")},
			want:  []string{"b1"}, taken: []int{0, 1},
		},
		{
			name: "max reached with due jobs left: due now", max: 2,
			heads: []storage.ClaimHead[string]{head("a", 5, later, "a1", "a2", "a3")},
			want:  []string{"a1", "a2"}, taken: []int{2}, nextDue: now,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan := storage.PlanClaim(storage.ClaimRequest{Now: now, Max: tt.max, After: tt.after}, tt.heads)
			require.Equal(t, tt.want, plan.Jobs)
			require.Equal(t, tt.taken, plan.Taken)
			require.Equal(t, tt.nextDue, plan.NextDue)
		})
	}
}

// BenchmarkPlanClaim measures the turns of a claim of 64 jobs from 16
// endpoints with 8 due jobs each.
func BenchmarkPlanClaim(b *testing.B) {
	heads := make([]storage.ClaimHead[string], 16)
	for i := range heads {
		heads[i] = storage.ClaimHead[string]{Endpoint: string(rune('a' + i)), Allow: 8, Due: make([]string, 8)}
	}
	r := storage.ClaimRequest{Now: time.Now(), Max: 64, After: "c"}
	b.ReportAllocs()
	for b.Loop() {
		if plan := storage.PlanClaim(r, heads); len(plan.Jobs) != r.Max {
			b.Fatal(len(plan.Jobs))
		}
	}
}
