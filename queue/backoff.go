package queue

import "time"

// Backoff decides how long to wait before the next attempt.
type Backoff interface {
	// Delay is the wait after the attempts-th failed attempt (1 after the
	// first).
	Delay(attempts int) time.Duration
}

// Exponential waits Base after the first failed attempt and twice as long
// after each further one, capped at Max, each wait spread by a jitter of
// ±20% so that deliveries that failed together do not retry together.
type Exponential struct {
	Base, Max time.Duration
	// Rand returns a number in [0, 1) for the jitter; nil means none.
	// Production passes math/rand/v2's Float64, tests a fixed function.
	Rand func() float64
}

var _ Backoff = Exponential{}

// Delay implements Backoff.
func (e Exponential) Delay(attempts int) time.Duration {
	d := e.Max
	if n := attempts - 1; n >= 0 && n < 62 && e.Base<<n > 0 && e.Base<<n < e.Max {
		d = e.Base << n
	}
	if attempts < 1 {
		d = e.Base
	}
	if e.Rand != nil {
		d = time.Duration(float64(d) * (0.8 + 0.4*e.Rand()))
	}
	return min(d, e.Max)
}
