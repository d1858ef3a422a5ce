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
	w.mark(tag)
	w.signal()
}

// mark records that the log tagged tag moved, without waking the waiter.
func (w *Waiter) mark(tag int) {
	w.mu.Lock()
	w.fired = append(w.fired, tag)
	w.mu.Unlock()
}

// signal wakes the waiter (once, however many logs moved).
func (w *Waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// wakeBatch holds back the wake-ups of one sync round until every log of
// the round has published its new high watermark: a long poll over many
// logs then wakes once and reads every log the round made readable,
// instead of waking on the round's first log and answering the others
// one fetch later (issue 18: end-to-end latency over 1,000 partitions).
type wakeBatch struct {
	ws map[*Waiter]struct{}
}

func (b *wakeBatch) add(w *Waiter) {
	if b.ws == nil {
		b.ws = map[*Waiter]struct{}{}
	}
	b.ws[w] = struct{}{}
}

// flush wakes every waiter held back.
func (b *wakeBatch) flush() {
	if b == nil {
		return
	}
	for w := range b.ws {
		w.signal()
	}
	clear(b.ws)
}

// holdWakes makes the log's high-watermark wake-ups go to b (nil: wake at
// once) until holdWakes(nil).
func (l *Log) holdWakes(b *wakeBatch) {
	l.hwMu.Lock()
	l.wakes = b
	l.hwMu.Unlock()
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
