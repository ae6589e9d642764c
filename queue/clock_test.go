package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rxgate/rxgate/queue"
)

func TestOffsetClock(t *testing.T) {
	t.Parallel()
	c := queue.NewOffsetClock()
	start := c.Now()
	assert.WithinDuration(t, time.Now(), start, time.Minute)

	hour := c.Until(start.Add(time.Hour))
	day := c.Until(start.Add(24 * time.Hour))
	select {
	case <-hour:
		t.Fatal("an hour has not passed")
	default:
	}
	now := c.Advance(90 * time.Minute)
	assert.False(t, now.Before(start.Add(90*time.Minute)))
	select {
	case got := <-hour:
		assert.False(t, got.Before(start.Add(time.Hour)), "fired at or after its deadline")
	default:
		t.Fatal("Advance past the deadline fires the wait at once")
	}
	select {
	case <-day:
		t.Fatal("a day has not passed")
	default:
	}
	c.Advance(-time.Hour)
	assert.Equal(t, 90*time.Minute, c.Offset(), "the clock never goes back")
	c.Advance(23 * time.Hour)
	select {
	case <-day:
	default:
		t.Fatal("the day's wait fired")
	}
	past := c.Until(start)
	select {
	case <-past:
	default:
		t.Fatal("a deadline already passed fires at once")
	}
	// A short wait fires in real time, unadvanced.
	select {
	case <-c.Until(c.Now().Add(time.Millisecond)):
	case <-time.After(10 * time.Second):
		require.Fail(t, "the real-time wait never fired")
	}
}
