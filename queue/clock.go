package queue

import (
	"sync"
	"time"
)

// Clock is the queue's time: when jobs are due, leases, backoff and the
// signature timestamp. Tests inject a fake one.
type Clock interface {
	Now() time.Time
	// Until returns a channel that receives once the clock reads deadline
	// or later. An absolute deadline, unlike a duration, cannot be
	// stretched by time passing between reading the clock and waiting.
	Until(deadline time.Time) <-chan time.Time
}

// SystemClock is the real clock.
type SystemClock struct{}

var (
	_ Clock = SystemClock{}
	_ Clock = funcClock{}
)

// Now is time.Now.
func (SystemClock) Now() time.Time { return time.Now() }

// Until waits in real time.
func (SystemClock) Until(deadline time.Time) <-chan time.Time {
	return time.After(time.Until(deadline))
}

// ClockFunc is a Clock that reads the time from now and waits in real
// time: for a process whose clock is injected as a function.
func ClockFunc(now func() time.Time) Clock { return funcClock{now: now} }

type funcClock struct{ now func() time.Time }

func (c funcClock) Now() time.Time { return c.now() }

func (c funcClock) Until(deadline time.Time) <-chan time.Time {
	return time.After(deadline.Sub(c.now()))
}

// OffsetClock is the real clock moved forward by an offset that only
// grows: the sandbox's clock, which an operator advances to watch retries,
// backoff, token expiry and retention happen without waiting. Advance
// wakes every Until it makes due. It is safe for concurrent use.
type OffsetClock struct {
	mu      sync.Mutex
	offset  time.Duration              // guarded by mu
	waiters map[*offsetWaiter]struct{} // guarded by mu
	real    func() time.Time
}

// offsetWaiter is an Until not yet due: it fires once, from its timer (in
// real time) or from Advance, whichever comes first.
type offsetWaiter struct {
	at    time.Time
	ch    chan time.Time
	timer *time.Timer
}

var _ Clock = (*OffsetClock)(nil)

// NewOffsetClock returns an OffsetClock reading the real time.
func NewOffsetClock() *OffsetClock {
	return &OffsetClock{real: time.Now, waiters: make(map[*offsetWaiter]struct{})}
}

// Now is the real time plus the offset.
func (c *OffsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.real().Add(c.offset)
}

// Offset is how far the clock has been advanced in all.
func (c *OffsetClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Advance moves the clock forward by d (a d <= 0 does nothing) and fires
// every Until then due. It returns the new time.
func (c *OffsetClock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.offset += d
	}
	now := c.real().Add(c.offset)
	for w := range c.waiters {
		if !w.at.After(now) {
			c.fireLocked(w, now)
		}
	}
	return now
}

// Until returns a channel that receives once the clock reads deadline or
// later: after the real time left, or sooner when Advance gets there.
func (c *OffsetClock) Until(deadline time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	now := c.real().Add(c.offset)
	if !deadline.After(now) {
		ch <- now
		return ch
	}
	w := &offsetWaiter{at: deadline, ch: ch}
	c.waiters[w] = struct{}{}
	// The timer's function runs on its own goroutine only when it fires,
	// and returns at once; Advance stops it when it fires the waiter
	// first.
	w.timer = time.AfterFunc(deadline.Sub(now), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.waiters[w]; ok {
			c.fireLocked(w, c.real().Add(c.offset))
		}
	})
	return ch
}

func (c *OffsetClock) fireLocked(w *offsetWaiter, now time.Time) {
	delete(c.waiters, w)
	if w.timer != nil {
		w.timer.Stop()
	}
	w.ch <- now
}
