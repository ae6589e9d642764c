package queue

import "time"

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
