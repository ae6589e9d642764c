package queue

import "time"

// SetSlowWrite changes how long an outcome write of q may take and count
// as not slow (busy); before Start.
func SetSlowWrite(q *Queue, d time.Duration) { q.slowWrite = d }
