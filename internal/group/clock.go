package group

import "time"

// Clock is the coordinator's time source. Tests inject a manual clock so
// session and rebalance timeouts fire without sleeping.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine (or, for test clocks, from the
	// goroutine that advances time) once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

func stopTimer(t Timer) {
	if t != nil {
		t.Stop()
	}
}
