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

// TestEvery: on a Manual clock fn runs inside Advance once per period
// passed, at each period's time; after stop it never runs again.
func TestEvery(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	c := NewManual(start)
	var got []time.Duration
	stop := Every(c, 10*time.Second, func() { got = append(got, c.Now().Sub(start)) })
	c.Advance(9 * time.Second)
	if len(got) != 0 {
		t.Fatalf("ran before its period: %v", got)
	}
	c.Advance(25 * time.Second)
	want := []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("ran at %v, want %v", got, want)
	}
	stop()
	c.Advance(time.Minute)
	if len(got) != 3 {
		t.Fatalf("ran after stop: %v", got)
	}
}

// TestEveryStopWaits: stop waits for a call in progress on the real clock.
func TestEveryStopWaits(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var done bool
	once := false
	stop := Every(Real(), time.Millisecond, func() {
		if once {
			return
		}
		once = true
		close(started)
		<-release
		done = true
	})
	<-started
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("stop returned while fn was running")
	default:
	}
	close(release)
	<-stopped
	if !done {
		t.Fatal("stop returned before fn did")
	}
}
