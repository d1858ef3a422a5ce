package protocol

import (
	"errors"
	"net"

	"github.com/strata-io/strata/internal/authz"
)

// ErrClosed is returned by ServeInProcess once the server is shutting down.
var ErrClosed = errors.New("protocol: server closed")

// ServeInProcess serves one connection made inside this process (one end
// of a net.Pipe held by the web console's Kafka client) exactly as a
// connection accepted on the listener: the same framing, pipeline,
// handlers, validation and metrics. It skips what belongs to the network
// only: TLS (the bytes never leave the process) and SASL authentication,
// since the caller authenticates its own users before it sends anything
// (user names the principal for logs; an authorizer would check it).
// Shutdown ends the connection like any other. It returns at once.
func (s *Server) ServeInProcess(nc net.Conn, user string) error {
	c := newConn(s, nc, s.defaultListener())
	c.remote = "in-process:" + user
	c.sasl.done = true
	c.sasl.user = user
	c.setPrincipal(authz.User(user)) // with an authorizer, User:<user> needs ACLs (or super.users)
	return s.serveInProcess(c)
}

// ServeInProcessAsBroker serves one in-process connection of the broker
// itself (the web console's history sampler reading the broker's own
// groups and offsets): it has no client principal, so the authorizer is
// not consulted and no client quota applies, as a Kafka broker reads its
// own state (GroupCoordinator, ReplicaManager) without authorizing
// itself. Nothing outside the process can open such a connection.
func (s *Server) ServeInProcessAsBroker(nc net.Conn) error {
	c := newConn(s, nc, s.defaultListener())
	c.remote = "in-process:broker"
	c.sasl.done = true
	c.itself = true
	c.setPrincipal(authz.User(BrokerItself))
	return s.serveInProcess(c)
}

// BrokerItself names the principal of a ServeInProcessAsBroker connection
// in logs; authorization never looks at it.
const BrokerItself = "strata-broker-itself"

func (s *Server) serveInProcess(c *conn) error {
	nc := c.nc
	c.authed.Store(true)
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		nc.Close()
		return ErrClosed
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	return nil
}
