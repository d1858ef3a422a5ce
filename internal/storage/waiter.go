package storage

import "sync"

// Waiter lets one long-polling fetch wait on many logs at once: it is
// added to each log it reads (AddWaiter, with a tag such as the
// partition's position in the request), and a log whose high watermark or
// last stable offset moves fires it. A wake-up costs the same whatever the
// number of logs: one channel to wait on, and Take tells which logs moved,
// so only those are read again.
type Waiter struct {
	ch    chan struct{}
	mu    sync.Mutex
	fired []int
}

// NewWaiter returns a waiter that has not fired.
func NewWaiter() *Waiter { return &Waiter{ch: make(chan struct{}, 1)} }

// C receives a value once a log fired since the last receive.
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Take appends to dst the tags of the logs that fired since the last Take
// (a log may appear more than once) and forgets them.
func (w *Waiter) Take(dst []int) []int {
	w.mu.Lock()
	dst = append(dst, w.fired...)
	w.fired = w.fired[:0]
	w.mu.Unlock()
	return dst
}

func (w *Waiter) fire(tag int) {
	w.mu.Lock()
	w.fired = append(w.fired, tag)
	w.mu.Unlock()
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

type waiterReg struct {
	w   *Waiter
	tag int
}

// AddWaiter makes the log fire w with tag whenever its high watermark or
// last stable offset moves (and when it fails or closes), until
// RemoveWaiter. Add it before reading, so no append is missed.
func (l *Log) AddWaiter(w *Waiter, tag int) {
	l.hwMu.Lock()
	l.waiters = append(l.waiters, waiterReg{w, tag})
	l.hwMu.Unlock()
}

// RemoveWaiter undoes AddWaiter.
func (l *Log) RemoveWaiter(w *Waiter) {
	l.hwMu.Lock()
	for i, r := range l.waiters {
		if r.w == w {
			last := len(l.waiters) - 1
			l.waiters[i] = l.waiters[last]
			l.waiters[last] = waiterReg{}
			l.waiters = l.waiters[:last]
			break
		}
	}
	l.hwMu.Unlock()
}
