package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/metrics"
	"golang.org/x/sys/unix"
)

// bind claims every listening port before the data directory is touched,
// as Kafka's BrokerServer creates its SocketServer (binding each listener)
// before LogManager starts: a port conflict fails at once, naming the
// setting to change, instead of after recovery. Connections wait in the
// backlog until Start serves them.
func (s *Server) bind() error {
	cls := s.cfg.ClientListeners()
	if len(cls) != 1 {
		return fmt.Errorf("listeners (%s): exactly one client listener is served", s.cfg.Get("listeners"))
	}
	s.listener = cls[0]
	addr := cls[0].Addr()
	lc := net.ListenConfig{Control: socketBuffers(s.cfg.Int("socket.send.buffer.bytes"), s.cfg.Int("socket.receive.buffer.bytes"))}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return listenError("Kafka listener", addr, "listeners", err)
	}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.ln = ln
	if cl, ok := s.cfg.ControllerListener(); ok && clusterConfigured(s.cfg) && s.cfg.HasRole(config.RoleController) {
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
		m := metrics.NewServer(maddr, s.reg, s.Ready)
		if err := m.Listen(); err != nil {
			s.closeListeners()
			return listenError("HTTP listener (metrics and admin API)", maddr, "strata.metrics.listener", err)
		}
		s.metrics = m
	}
	return nil
}

// closeListeners releases what bind claimed (New failed after it).
func (s *Server) closeListeners() {
	if s.ln != nil {
		s.ln.Close()
		s.ln = nil
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
