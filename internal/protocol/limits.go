package protocol

import (
	"net"
	"sync"
	"time"
)

// connQuotas counts connections as Kafka's ConnectionQuotas does: the
// acceptor waits for a slot while max.connections are open (new
// connections wait in the listen backlog), and a connection from an IP
// address that already has max.connections.per.ip (or its override) is
// closed at once.
type connQuotas struct {
	max       int
	perIP     int
	overrides map[string]int // IP address (net.IP.String()) -> max

	mu     sync.Mutex
	cond   *sync.Cond
	total  int
	counts map[string]int
	closed bool
}

func newConnQuotas(max, perIP int, overrides map[string]int) *connQuotas {
	q := &connQuotas{max: max, perIP: perIP, overrides: overrides, counts: map[string]int{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// waitSlot blocks while the broker holds max.connections; false once the
// quotas are closed (shutdown).
func (q *connQuotas) waitSlot() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.total >= q.max && !q.closed {
		q.cond.Wait()
	}
	return !q.closed
}

// inc counts a new connection from ip. It returns false, with the limit,
// when ip already had its maximum: the caller closes the connection and
// calls dec, as Kafka's acceptor does.
func (q *connQuotas) inc(ip string) (bool, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.counts[ip]
	q.counts[ip] = n + 1
	q.total++
	max, ok := q.overrides[ip]
	if !ok {
		max = q.perIP
	}
	return n < max, max
}

// dec uncounts a closed connection and wakes the acceptor.
func (q *connQuotas) dec(ip string) {
	q.mu.Lock()
	if q.counts[ip]--; q.counts[ip] <= 0 {
		delete(q.counts, ip)
	}
	q.total--
	q.mu.Unlock()
	q.cond.Broadcast()
}

// close releases a waiting acceptor (shutdown).
func (q *connQuotas) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// remoteIP is the IP address of a connection's peer, as the quotas key it.
func remoteIP(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok {
		if v4 := ta.IP.To4(); v4 != nil {
			return v4.String()
		}
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// requestPool bounds the bytes of requests read and not yet answered
// across all connections (queued.max.request.bytes; Kafka's
// SimpleMemoryPool, non-strict: a request is admitted while any room is
// left, so one request larger than what is free never waits forever).
type requestPool struct {
	size int64 // <= 0: unbounded

	mu    sync.Mutex
	cond  *sync.Cond
	avail int64
}

func newRequestPool(size int64) *requestPool {
	p := &requestPool{size: size, avail: size}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// acquire takes n bytes, waiting while the pool is exhausted; false when
// stop reports true (the connection or the server is closing).
func (p *requestPool) acquire(n int64, stop func() bool) bool {
	if p.size <= 0 {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.avail <= 0 {
		if stop() {
			return false
		}
		p.cond.Wait()
	}
	p.avail -= n
	return true
}

// queued is how many bytes are taken now.
func (p *requestPool) queued() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size - p.avail
}

// release returns n bytes.
func (p *requestPool) release(n int64) {
	if p.size <= 0 || n == 0 {
		return
	}
	p.mu.Lock()
	p.avail += n
	p.mu.Unlock()
	p.cond.Broadcast()
}

// wake wakes every waiter so it checks its stop condition.
func (p *requestPool) wake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cond.Broadcast()
}

// reapIdle closes connections that have no request in progress and have
// been idle longer than connections.max.idle.ms (Kafka's Selector idle
// expiry), until the server shuts down.
func (s *Server) reapIdle(idle time.Duration) {
	defer s.wg.Done()
	every := min(max(idle/4, 10*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.mu.Lock()
			for c := range s.conns {
				if c.idleSince(now) > idle {
					s.logger.Info("closing idle connection", "remote", c.remote, "idle_ms", c.idleSince(now).Milliseconds(),
						"connections.max.idle.ms", idle.Milliseconds())
					c.nc.Close()
				}
			}
			s.mu.Unlock()
		}
	}
}
