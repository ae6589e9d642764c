// Package fake holds the test doubles rxgate's tests share: Clock, a clock
// that moves only when told to, and IdP, an external identity provider
// that publishes a JWKS and mints tokens, well-formed or hostile.
//
// It imports no rxgate package but config, so that any package's tests,
// app/auth's included, can use it without importing the whole server, as
// testsuite would (testsuite imports app, which imports app/auth). Only
// tests and the other test kits (storagetest) import it.
package fake

import (
	"context"
	"sync"
	"time"
)

// Clock is a fake clock: it reads start until Advance moves it, or, made
// by NewSteppingClock, moves by a step at every reading, so that records
// created one after another get distinct, increasing times without a
// test sleeping. Until waits on it as on a real clock (it satisfies
// queue.Clock). It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time     // guarded by mu
	step    time.Duration // added to now after each reading
	waiters []waiter      // guarded by mu
	// added, when not nil, is closed when a waiter is added; guarded by
	// mu.
	added chan struct{}
}

// waiter is an Until not yet due.
type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a Clock reading start until it is advanced.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// NewSteppingClock returns a Clock whose first reading is start and whose
// every reading is step later than the one before.
func NewSteppingClock(start time.Time, step time.Duration) *Clock {
	return &Clock{now: start, step: step}
}

// Now returns the clock's time, and moves a stepping clock on by its
// step.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now
	if c.step != 0 {
		c.moveLocked(c.step)
	}
	return now
}

// Advance moves the clock forward by d and wakes every Until that is then
// due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveLocked(d)
}

// Until returns a channel that receives the clock's time once the clock
// reads deadline or later: at once when it already does, else when
// Advance (or a stepping clock's reading) gets there.
func (c *Clock) Until(deadline time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !deadline.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{at: deadline, ch: ch})
	if c.added != nil {
		close(c.added)
		c.added = nil
	}
	return ch
}

// WaitForWaiters returns once at least n Untils are waiting on the clock
// (not yet due), or with ctx's error: a test's way to know that what it
// drives is waiting for the time it is about to set.
func (c *Clock) WaitForWaiters(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.waiters) >= n {
			c.mu.Unlock()
			return nil
		}
		if c.added == nil {
			c.added = make(chan struct{})
		}
		added := c.added
		c.mu.Unlock()
		select {
		case <-added:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// moveLocked moves the clock by d and wakes the waiters then due. Each
// waiter's channel has room for the one value it ever receives, so the
// send does not block.
func (c *Clock) moveLocked(d time.Duration) {
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	clear(c.waiters[len(kept):])
	c.waiters = kept
}
