package postgres

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWakes: a NOTIFY naming a replica wakes that replica's queues only;
// one naming none wakes every listener, and an anonymous store, which no
// notifier names, wakes on every one.
func TestWakes(t *testing.T) {
	r1 := &Store{replica: &replica{id: "r1"}}
	anonymous := &Store{}
	for _, c := range []struct {
		s       *Store
		payload string
		want    bool
	}{
		{r1, "", true},
		{r1, "r1", true},
		{r1, "r2", false},
		{anonymous, "", true},
		{anonymous, "r2", true},
	} {
		require.Equal(t, c.want, c.s.wakes(c.payload), "%q", c.payload)
	}
}
