package server

import (
	"context"
	"net"

	"github.com/strata-io/strata/internal/console"
)

// mountConsole builds the web console and serves it at / on the HTTP
// listener. Its Kafka client talks to this broker's protocol server over
// in-process pipes (no socket, TLS or SASL), so every console action is
// an ordinary Kafka request.
func (s *Server) mountConsole() error {
	c, err := console.New(console.Config{
		Dial: func(context.Context) (net.Conn, error) {
			client, server := net.Pipe()
			if err := s.proto.ServeInProcess(server, "strata-console"); err != nil {
				client.Close()
				return nil, err
			}
			return client, nil
		},
		Credentials: s.broker,
		Compaction:  s.cleaner,
		Metrics:     s.reg,
		NodeID:      s.broker.NodeID(),
		ListenAddr:  s.cfg.Get("strata.metrics.listener"),
		Logger:      s.logger,
	})
	if err != nil {
		return err
	}
	s.console = c
	s.metrics.Handle("/", c.Handler())
	return nil
}

// closeConsole stops the console's sampler and Kafka client.
func (s *Server) closeConsole() {
	if s.console != nil {
		s.console.Close()
	}
}

// Console exposes the web console (nil without an HTTP listener).
func (s *Server) Console() *console.Console { return s.console }
