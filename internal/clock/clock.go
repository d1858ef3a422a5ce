// Package clock is Strata's time source: components that measure time
// (session and transaction timeouts, retention, compaction horizons) take a
// Clock, which is the real clock in production and a Manual clock in
// tests, so that a test moves time with Advance instead of sleeping.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and schedules calls.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine (Real) or from the goroutine
	// that advances time (Manual) once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it
	// did.
	Stop() bool
}

// Real returns the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Manual is a clock that moves only when told: Advance fires the due
// AfterFunc calls one by one, in time order, from the calling goroutine.
// It is safe for concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer
}

// NewManual returns a manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

type manualTimer struct {
	c       *Manual
	at      time.Time
	f       func()
	stopped bool
}

// Now implements Clock.
func (c *Manual) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements Clock.
func (c *Manual) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *manualTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves time forward by d, firing due timers one by one: while a
// timer's function runs, Now reads that timer's deadline.
func (c *Manual) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	for {
		var next *manualTimer
		live := c.timers[:0]
		for _, t := range c.timers {
			if t.stopped {
				continue
			}
			live = append(live, t)
			if !t.at.After(target) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		c.timers = live
		if next == nil {
			break
		}
		next.stopped = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
	if target.After(c.now) {
		c.now = target
	}
	c.mu.Unlock()
}

// Every calls fn every d on c at a fixed rate, as a time.Ticker would
// (calls a slow fn made late are skipped, not queued), until the returned
// stop is called. stop prevents later calls and waits for a running one to
// return, so the caller owns the calls: it must not call stop from fn.
// With a Manual clock fn runs inside Advance, once per period passed.
func Every(c Clock, d time.Duration, fn func()) (stop func()) {
	e := &every{c: c, d: d, fn: fn}
	e.mu.Lock()
	e.next = c.Now().Add(d)
	e.t = c.AfterFunc(d, e.fire)
	e.mu.Unlock()
	return e.stop
}

type every struct {
	c       Clock
	d       time.Duration
	fn      func()
	mu      sync.Mutex // guards stopped, t, next; running is added to under it
	stopped bool
	t       Timer
	next    time.Time
	running sync.WaitGroup
}

func (e *every) fire() {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return
	}
	e.running.Add(1)
	e.mu.Unlock()
	defer e.running.Done()
	e.fn()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	now := e.c.Now()
	for e.next = e.next.Add(e.d); !e.next.After(now); e.next = e.next.Add(e.d) {
	}
	e.t = e.c.AfterFunc(e.next.Sub(now), e.fire)
}

func (e *every) stop() {
	e.mu.Lock()
	e.stopped = true
	e.t.Stop()
	e.mu.Unlock()
	e.running.Wait()
}
