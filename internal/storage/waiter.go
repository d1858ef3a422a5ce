package storage

import "sync"

// Waiter lets one long-polling fetch, or one fetch session, wait on many
// logs at once: it is added to each log it reads (AddWaiter, with a tag
// such as the partition's position in the request), and a log whose high
// watermark or last stable offset moves fires it. A wake-up costs the same
// whatever the number of logs: one channel to wait on, and Take tells
// which logs moved, so only those are read again. A tag is listed once
// until taken, however often its log moves, so a waiter left on its logs
// between fetches (a fetch session's) holds at most one entry per tag.
type Waiter struct {
	ch     chan struct{}
	mu     sync.Mutex
	fired  []int
	listed []uint64 // bit per tag: in fired
}

// NewWaiter returns a waiter that has not fired.
func NewWaiter() *Waiter { return &Waiter{ch: make(chan struct{}, 1)} }

// C receives a value once a log fired since the last receive.
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Take appends to dst the tags of the logs that fired since the last Take
// (each once) and forgets them.
func (w *Waiter) Take(dst []int) []int {
	w.mu.Lock()
	dst = append(dst, w.fired...)
	for _, tag := range w.fired {
		w.listed[tag>>6] &^= 1 << (tag & 63)
	}
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
	word, bit := tag>>6, uint64(1)<<(tag&63)
	w.mu.Lock()
	if word >= len(w.listed) {
		w.listed = append(w.listed, make([]uint64, word+1-len(w.listed))...)
	}
	if w.listed[word]&bit == 0 {
		w.listed[word] |= bit
		w.fired = append(w.fired, tag)
	}
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

// AddWaiter makes the log fire w with tag (>= 0; tags are kept as a bit
// set, so small) whenever its high watermark or last stable offset moves
// (and when it fails or closes), until RemoveWaiter. Add it before
// reading, so no append is missed. A waiter is added to a log at most
// once.
func (l *Log) AddWaiter(w *Waiter, tag int) {
	l.hwMu.Lock()
	l.waiters = append(l.waiters, waiterReg{w, tag})
	l.hwMu.Unlock()
}

// RemoveWaiter undoes AddWaiter: once it returns, the log no longer fires
// w.
func (l *Log) RemoveWaiter(w *Waiter) {
	l.hwMu.Lock()
	l.waiters = removeReg(l.waiters, w)
	l.hwMu.Unlock()
}

func removeReg(regs []waiterReg, w *Waiter) []waiterReg {
	for i, r := range regs {
		if r.w == w {
			last := len(regs) - 1
			regs[i] = regs[last]
			regs[last] = waiterReg{}
			return regs[:last]
		}
	}
	return regs
}

// AddEndWaiter makes the log fire w with tag whenever its log end offset
// moves (a leader's replica fetches wait on it: a follower reads up to
// the log end, not the high watermark), when it fails or closes, and at
// WakeWaiters, until RemoveEndWaiter. Unlike AddWaiter it may be added
// after reading: the caller then compares LogEndOffset, taken before the
// read, with its value after AddEndWaiter returns, and reads again if it
// moved (a move published after that comparison fires w). A waiter is
// added to a log at most once.
func (l *Log) AddEndWaiter(w *Waiter, tag int) {
	l.hwMu.Lock()
	l.endWaiters = append(l.endWaiters, waiterReg{w, tag})
	l.nEndWaiters.Store(int32(len(l.endWaiters)))
	l.hwMu.Unlock()
}

// RemoveEndWaiter undoes AddEndWaiter: once it returns, the log no longer
// fires w.
func (l *Log) RemoveEndWaiter(w *Waiter) {
	l.hwMu.Lock()
	l.endWaiters = removeReg(l.endWaiters, w)
	l.nEndWaiters.Store(int32(len(l.endWaiters)))
	l.hwMu.Unlock()
}

// notifyEnd fires the end waiters: the log end moved (publishView, after
// storing the view: an AddEndWaiter that missed this call sees the new
// end), or the log failed or closed. Logs without end waiters pay one
// atomic load.
func (l *Log) notifyEnd() {
	if l.nEndWaiters.Load() == 0 {
		return
	}
	l.hwMu.Lock()
	for _, r := range l.endWaiters {
		r.w.fire(r.tag)
	}
	l.hwMu.Unlock()
}

// WakeWaiters fires every waiter added to the log as a move would: the
// partition's leadership changed, and a long poll on it must look again
// to answer NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH at once (Kafka's
// ReplicaManager completes the partition's delayed fetches when it makes
// it a follower).
func (l *Log) WakeWaiters() {
	l.hwMu.Lock()
	for _, r := range l.waiters {
		r.w.fire(r.tag)
	}
	for _, r := range l.endWaiters {
		r.w.fire(r.tag)
	}
	l.hwMu.Unlock()
}

// Waiters is the number of waiters added to the log (AddWaiter,
// AddEndWaiter) and not removed (tests: a fetch session's waiter leaves
// its logs when it ends, a replica fetch's at its end).
func (l *Log) Waiters() int {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	return len(l.waiters) + len(l.endWaiters)
}
