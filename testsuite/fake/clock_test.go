package fake_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/testsuite/fake"
)

var start = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// due reports whether ch has received, and what.
func due(t testing.TB, ch <-chan time.Time) (time.Time, bool) {
	t.Helper()
	select {
	case at := <-ch:
		return at, true
	default:
		return time.Time{}, false
	}
}

// TestClock: a clock reads its start until advanced; Until is due at
// once for a deadline reached, and when Advance reaches it otherwise,
// not before.
func TestClock(t *testing.T) {
	t.Parallel()
	c := fake.NewClock(start)
	require.Equal(t, start, c.Now())
	require.Equal(t, start, c.Now(), "reading does not move the clock")

	at, ok := due(t, c.Until(start))
	require.True(t, ok, "a deadline already reached is due at once")
	require.Equal(t, start, at)

	later := c.Until(start.Add(time.Minute))
	much := c.Until(start.Add(time.Hour))
	c.Advance(59 * time.Second)
	_, ok = due(t, later)
	require.False(t, ok, "not due a second early")
	c.Advance(2 * time.Second)
	at, ok = due(t, later)
	require.True(t, ok, "due once the clock passes the deadline")
	require.Equal(t, start.Add(61*time.Second), at, "with the clock's time")
	_, ok = due(t, much)
	require.False(t, ok)
	c.Advance(time.Hour)
	_, ok = due(t, much)
	require.True(t, ok)
	require.Equal(t, start.Add(time.Hour+61*time.Second), c.Now())
}

// TestSteppingClock: each reading is a step after the one before, and a
// reading that passes a deadline makes its Until due.
func TestSteppingClock(t *testing.T) {
	t.Parallel()
	c := fake.NewSteppingClock(start, time.Millisecond)
	require.Equal(t, start, c.Now())
	require.Equal(t, start.Add(time.Millisecond), c.Now())
	ch := c.Until(start.Add(3 * time.Millisecond))
	require.Equal(t, start.Add(2*time.Millisecond), c.Now())
	_, ok := due(t, ch)
	require.True(t, ok)
	c.Advance(time.Second)
	require.Equal(t, start.Add(time.Second+3*time.Millisecond), c.Now())
}

// TestClockConcurrent reads, advances and waits from many goroutines (for
// the race detector), and every reading of a stepping clock is distinct.
func TestClockConcurrent(t *testing.T) {
	t.Parallel()
	c := fake.NewSteppingClock(start, time.Nanosecond)
	const goroutines, reads = 8, 200
	var (
		mu   sync.Mutex
		seen = map[time.Time]bool{}
		wg   sync.WaitGroup
	)
	for range goroutines {
		wg.Go(func() {
			for range reads {
				now := c.Now()
				mu.Lock()
				seen[now] = true
				mu.Unlock()
				c.Advance(time.Microsecond)
				<-c.Until(now) // a reached deadline is due at once
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, goroutines*reads, "every reading is distinct")
}

// TestWaitForWaiters returns once as many Untils wait as asked, and not
// while fewer do.
func TestWaitForWaiters(t *testing.T) {
	t.Parallel()
	c := fake.NewClock(start)
	require.NoError(t, c.WaitForWaiters(t.Context(), 0))
	_ = c.Until(start) // due at once: not waiting
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, c.WaitForWaiters(ctx, 1), context.Canceled, "no Until waits yet")

	done := make(chan error)
	go func() { done <- c.WaitForWaiters(t.Context(), 2) }()
	_ = c.Until(start.Add(time.Second))
	_ = c.Until(start.Add(time.Minute))
	require.NoError(t, <-done)
	c.Advance(time.Second)
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, c.WaitForWaiters(ctx, 2), context.Canceled, "one of the two is due")
}
