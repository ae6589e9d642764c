package storage

import "sync"

// Signal tells every watcher that something happened, without ever
// blocking the one who tells: each watcher has a channel of one slot, and a
// signal that finds the slot full merges with the one waiting there. A
// backend keeps one for JobStore.WatchJobs. The zero value is ready to use.
type Signal struct {
	mu       sync.Mutex
	watchers map[chan struct{}]struct{}
}

// Watch returns a channel that receives after each Notify from now on, and
// a function that stops the watch.
func (s *Signal) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.watchers == nil {
		s.watchers = make(map[chan struct{}]struct{})
	}
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}
}

// Notify wakes every watcher.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
