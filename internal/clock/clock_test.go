package clock

import (
	"testing"
	"time"
)

// TestManualFiresInOrder checks that Advance fires due timers in deadline
// order with Now at each deadline, skips stopped ones, and lets a firing
// timer schedule another that is due within the same Advance.
func TestManualFiresInOrder(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	c := NewManual(start)
	var got []time.Duration
	record := func() { got = append(got, c.Now().Sub(start)) }
	c.AfterFunc(3*time.Second, record)
	c.AfterFunc(1*time.Second, func() {
		record()
		c.AfterFunc(time.Second, record) // due at 2s
	})
	stopped := c.AfterFunc(2500*time.Millisecond, record)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true then false")
	}
	c.AfterFunc(10*time.Second, record)
	c.Advance(5 * time.Second)
	want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("fired at %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fired at %v, want %v", got, want)
		}
	}
	if c.Now() != start.Add(5*time.Second) {
		t.Fatalf("Now %v", c.Now())
	}
}
