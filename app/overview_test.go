package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDeliveryWindow(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 30, 15, 0, time.UTC)
	tests := []struct {
		name string
		adds []time.Duration // before now
		want DeliveryCounts
	}{
		{name: "none"},
		{name: "this minute", adds: []time.Duration{0, time.Second}, want: DeliveryCounts{Delivered: 2}},
		{name: "59 minutes ago counts", adds: []time.Duration{59 * time.Minute}, want: DeliveryCounts{Delivered: 1}},
		{name: "an hour ago does not", adds: []time.Duration{60 * time.Minute, 61 * time.Minute}},
		{name: "a bucket reused an hour later starts again", adds: []time.Duration{60 * time.Minute, 0}, want: DeliveryCounts{Delivered: 1}},
		{name: "in the future does not", adds: []time.Duration{-2 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w deliveryWindow
			for _, d := range tt.adds {
				w.add(now.Add(-d), "delivered")
			}
			assert.Equal(t, tt.want, w.lastHour(now))
		})
	}
	t.Run("by outcome", func(t *testing.T) {
		var w deliveryWindow
		for _, o := range []string{"delivered", "retry", "retry", "failed", "unknown"} {
			w.add(now, o)
		}
		assert.Equal(t, DeliveryCounts{Delivered: 1, Retry: 2, Failed: 1}, w.lastHour(now))
	})
}
