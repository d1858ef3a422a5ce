package protocol

import (
	"net"
	"sort"
	"sync"
	"time"
)

// connQuotas counts connections as Kafka's ConnectionQuotas does: a
// listener's acceptor waits for a slot while its listener holds
// listener.name.<l>.max.connections (default max.connections) or, on any
// listener but the protected one, while the broker holds max.connections
// (new connections wait in the listen backlog); a connection from an IP
// address that already has max.connections.per.ip (or its override) is
// closed at once. The protected listener is the inter-broker listener when
// the broker has more than one (Kafka's protectedListener): brokers still
// get in when clients hold every slot, and the other listeners then close
// their least recently active connections until the broker is back at
// max.connections (Kafka's maxConnectionsExceeded / closeExcessConnections).
// Every limit can change while running (SocketServer's reconfigurable
// configs): new connections are counted against the new limits, open ones
// stay.
type connQuotas struct {
	mu     sync.Mutex
	cond   *sync.Cond
	lim    ConnectionLimits
	total  int
	counts map[string]int // by IP address
	byLn   map[string]int // by listener name
	closed bool
}

// ConnectionLimits are Kafka's connection quota settings (SocketServer
// ConnectionQuotas), taken as Kafka takes them: 0 is a limit of zero.
type ConnectionLimits struct {
	// Max is max.connections, the broker's total.
	Max int
	// PerIP is max.connections.per.ip; PerIPOverrides maps IP addresses
	// (net.IP.String of the 4-byte form for IPv4) to their own limit
	// (max.connections.per.ip.overrides, host names resolved).
	PerIP          int
	PerIPOverrides map[string]int
	// PerListener is each listener's listener.name.<l>.max.connections
	// (Kafka falls back to max.connections; a listener not in the map has
	// no limit of its own).
	PerListener map[string]int
	// Protected is the inter-broker listener's name when the broker has
	// several listeners ("" when none is protected).
	Protected string
}

func newConnQuotas(lim ConnectionLimits) *connQuotas {
	q := &connQuotas{lim: lim, counts: map[string]int{}, byLn: map[string]int{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// set replaces the limits and wakes waiting acceptors.
func (q *connQuotas) set(lim ConnectionLimits) {
	q.mu.Lock()
	q.lim = lim
	q.mu.Unlock()
	q.cond.Broadcast()
}

// available is Kafka's connectionSlotAvailable.
func (q *connQuotas) available(listener string) bool {
	if max, ok := q.lim.PerListener[listener]; ok && q.byLn[listener] >= max {
		return false
	}
	if listener != "" && listener == q.lim.Protected {
		return true
	}
	return q.total < q.lim.Max
}

// waitSlot blocks while listener has no slot; false once the quotas are
// closed (shutdown).
func (q *connQuotas) waitSlot(listener string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.available(listener) && !q.closed {
		q.cond.Wait()
	}
	return !q.closed
}

// inc counts a new connection from ip on listener. It returns false, with
// the limit, when ip already had its maximum: the caller closes the
// connection and calls dec, as Kafka's acceptor does.
func (q *connQuotas) inc(ip, listener string) (bool, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := q.counts[ip]
	q.counts[ip] = n + 1
	q.byLn[listener]++
	q.total++
	max, ok := q.lim.PerIPOverrides[ip]
	if !ok {
		max = q.lim.PerIP
	}
	return n < max, max
}

// excess is how many connections of unprotected listeners must close for
// the broker to be back at max.connections (Kafka's
// maxConnectionsExceeded), 0 when none.
func (q *connQuotas) excess() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(q.total-q.lim.Max, 0)
}

// protected is the protected listener's name ("" when none).
func (q *connQuotas) protected() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lim.Protected
}

// dec uncounts a closed connection and wakes the acceptors.
func (q *connQuotas) dec(ip, listener string) {
	q.mu.Lock()
	if q.counts[ip]--; q.counts[ip] <= 0 {
		delete(q.counts, ip)
	}
	if q.byLn[listener]--; q.byLn[listener] <= 0 {
		delete(q.byLn, listener)
	}
	q.total--
	q.mu.Unlock()
	q.cond.Broadcast()
}

// close releases waiting acceptors (shutdown).
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

// SetConnectionLimits applies new connection limits (max.connections,
// max.connections.per.ip, max.connections.per.ip.overrides,
// listener.name.<l>.max.connections updated dynamically): acceptors
// waiting for a slot re-check at once; open connections stay, as in Kafka,
// except that connections beyond a lowered max.connections made room for
// by the protected listener are closed as below.
func (s *Server) SetConnectionLimits(lim ConnectionLimits) {
	if !s.cfg.LimitConnections {
		return
	}
	s.quotas.set(lim)
}

// closeExcessConnections closes, while the broker holds more than
// max.connections because the protected (inter-broker) listener went
// beyond it, the least recently active connections of the other listeners
// (Kafka's Processor.closeExcessConnections, lowest-priority channel
// first).
func (s *Server) closeExcessConnections() {
	n := s.quotas.excess()
	if n == 0 {
		return
	}
	protected := s.quotas.protected()
	now := time.Now()
	s.mu.Lock()
	var victims []*conn
	for c := range s.conns {
		if c.l != nil && c.l.Name != protected && !c.itself {
			victims = append(victims, c)
		}
	}
	s.mu.Unlock()
	sort.Slice(victims, func(i, j int) bool { return victims[i].idleSince(now) > victims[j].idleSince(now) })
	for _, c := range victims[:min(n, len(victims))] {
		s.logger.Info("closing connection: the inter-broker listener needs a slot beyond max.connections", "remote", c.remote, "listener", c.l.Name)
		c.nc.Close()
	}
}
