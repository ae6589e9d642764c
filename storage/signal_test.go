package storage_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/storage"
)

func TestSignal(t *testing.T) {
	t.Parallel()
	var s storage.Signal
	s.Notify() // nobody watches: nothing blocks
	a, stopA := s.Watch()
	b, stopB := s.Watch()
	defer stopB()
	require.Empty(t, a, "a new watch has nothing waiting")

	s.Notify()
	s.Notify() // merges with the one waiting
	require.Len(t, a, 1)
	require.Len(t, b, 1)
	<-a
	<-b
	require.Empty(t, a, "two notifies before a read are one wake")

	stopA()
	stopA()
	s.Notify()
	require.Empty(t, a, "a stopped watch is not woken")
	require.Len(t, b, 1)

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				s.Notify()
			}
		})
	}
	wg.Wait() // never blocks, however many notify at once
	require.Len(t, b, 1)
}
