package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/strata-io/strata/internal/authz"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/metrics"
	"github.com/strata-io/strata/internal/protocol"
	"golang.org/x/sys/unix"
)

// bind claims every listening port before the data directory is touched,
// as Kafka's BrokerServer creates its SocketServer (binding each listener)
// before LogManager starts: a port conflict fails at once, naming the
// setting to change, instead of after recovery. Connections wait in the
// backlog until Start serves them.
func (s *Server) bind() error {
	lc := net.ListenConfig{Control: socketBuffers(s.cfg.Int("socket.send.buffer.bytes"), s.cfg.Int("socket.receive.buffer.bytes"))}
	for _, l := range s.lns {
		addr := l.cfg.Addr()
		ln, err := lc.Listen(context.Background(), "tcp", addr)
		if err != nil {
			s.closeListeners()
			what := "Kafka listener"
			if len(s.lns) > 1 {
				what += " " + l.cfg.Name
			}
			return listenError(what, addr, "listeners", err)
		}
		if l.tls != nil {
			ln = tls.NewListener(ln, l.tls)
		}
		l.ln = ln
	}
	if cl, ok := s.cfg.ControllerListener(); ok && s.ctlLn == nil && clusterConfigured(s.cfg) && s.cfg.HasRole(config.RoleController) {
		// The metadata store member's listener (docs/cluster.md "One
		// port per controller"), handed to it at Start.
		cln, err := net.Listen("tcp", cl.Addr())
		if err != nil {
			s.closeListeners()
			return listenError("controller listener", cl.Addr(), "listeners", err)
		}
		s.ctlLn = cln
	}
	if maddr := strings.TrimSpace(s.cfg.Get("strata.metrics.listener")); maddr != "" {
		m := metrics.NewServer(maddr, s.reg, s.Ready, s.parts)
		if err := m.Listen(); err != nil {
			s.closeListeners()
			return listenError("HTTP listener (metrics and admin API)", maddr, "strata.metrics.listener", err)
		}
		s.metrics = m
	}
	return nil
}

// clientListener is one client listener of this node (Kafka's listeners
// minus the controller listeners): its settings, its socket (bound by
// bind) and the address it is advertised at (set by Start).
type clientListener struct {
	cfg        config.Listener
	tls        *tls.Config
	mechanisms []string
	plainUsers map[string]string
	mapper     *authz.Mapper
	ln         net.Listener
	host       string
	port       int32
}

// newClientListeners reads every client listener's security settings
// (listener.name.<name>.* over the unprefixed ones): TLS key and trust
// stores, SASL mechanisms and PLAIN users, principal mapping rules.
func newClientListeners(cfg *config.Broker) ([]*clientListener, error) {
	var out []*clientListener
	for _, l := range cfg.ClientListeners() {
		tlsCfg, err := cfg.ServerTLSFor(l)
		if err != nil {
			return nil, fmt.Errorf("kafka listener %s TLS: %w", l.Name, err)
		}
		users, err := cfg.PlainUsersFor(l)
		if err != nil {
			return nil, fmt.Errorf("kafka listener %s SASL: %w", l.Name, err)
		}
		mapper, err := authz.ParseMappingRules(cfg.ListenerValue(l.Name, "ssl.principal.mapping.rules"))
		if err != nil {
			return nil, fmt.Errorf("kafka listener %s: ssl.principal.mapping.rules: %w", l.Name, err)
		}
		out = append(out, &clientListener{cfg: l, tls: tlsCfg, mechanisms: cfg.SASLMechanismsFor(l), plainUsers: users, mapper: mapper})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("listeners (%s): no client listener", cfg.Get("listeners"))
	}
	return out, nil
}

// protocolListener is l as the protocol server serves it.
func (l *clientListener) protocolListener() protocol.Listener {
	return protocol.Listener{Name: l.cfg.Name, SASLMechanisms: l.mechanisms, PlainUsers: l.plainUsers,
		PrincipalMapper: l.mapper, AdvertisedHost: l.host, AdvertisedPort: l.port}
}

// endpoints are this broker's advertised endpoints, one per client
// listener, as registered in the cluster metadata.
func (s *Server) endpoints() []meta.Endpoint {
	out := make([]meta.Endpoint, len(s.lns))
	for i, l := range s.lns {
		out[i] = meta.Endpoint{Name: l.cfg.Name, Host: l.host, Port: l.port, Protocol: l.cfg.Protocol}
	}
	return out
}

// listenerNamed is the client listener of that name (nil if none).
func (s *Server) listenerNamed(name string) *clientListener {
	for _, l := range s.lns {
		if l.cfg.Name == name {
			return l
		}
	}
	return nil
}

// closeListeners releases what bind claimed (New failed after it).
func (s *Server) closeListeners() {
	for _, l := range s.lns {
		if l.ln != nil {
			l.ln.Close()
			l.ln = nil
		}
	}
	if s.ctlLn != nil {
		s.ctlLn.Close()
		s.ctlLn = nil
	}
	if s.metrics != nil {
		s.metrics.Close()
	}
}

// listenError says which setting to change when a port cannot be bound.
func listenError(what, addr, setting string, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("%s: %s is already in use (by another broker?): set %s to a free address", what, addr, setting)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%s: no permission to listen on %s (ports below 1024 need privileges): set %s to another port", what, addr, setting)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("%s: %s is not an address of this machine: set %s to one of its addresses (or 0.0.0.0)", what, addr, setting)
	}
	return fmt.Errorf("%s: cannot listen on %s (%s): %w", what, addr, setting, err)
}

// socketBuffers sets SO_SNDBUF and SO_RCVBUF (socket.send.buffer.bytes,
// socket.receive.buffer.bytes; -1 keeps the OS default) on the listening
// socket before listen(2): accepted connections inherit them, and the
// receive buffer must be set before the handshake to size the TCP window
// (tcp(7)). Kafka sets the same on its server socket and accepted channels
// (SocketServer's Acceptor.openServerSocket and accept).
func socketBuffers(send, recv int) func(network, address string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if send != -1 {
				if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, send); err != nil {
					serr = fmt.Errorf("socket.send.buffer.bytes=%d: %w", send, err)
					return
				}
			}
			if recv != -1 {
				if err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, recv); err != nil {
					serr = fmt.Errorf("socket.receive.buffer.bytes=%d: %w", recv, err)
				}
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}
