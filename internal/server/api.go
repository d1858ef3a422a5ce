// Package server wires one Strata broker together: log directories and
// partitions (broker), the Kafka listener (protocol), the cleaner, the group
// coordinator and the metrics endpoint, and owns their lifecycles.
package server

// CONTRACT STUB written by the lead; the WIRE helper implements it keeping
// these exported names and signatures (cmd/strata and tests use them).

import (
	"context"
	"log/slog"
	"net"

	"github.com/strata-io/strata/internal/config"
)

// Server is one running broker.
type Server struct{}

// New opens the log directories (running crash recovery when the previous
// shutdown was not clean), loads topic metadata and group state, and builds
// every component. It does not listen yet.
func New(cfg *config.Broker, logger *slog.Logger) (*Server, error) { panic("stub") }

// Start binds the Kafka listener (listeners; port 0 = random) and the
// metrics/admin HTTP listener, then serves until Shutdown.
func (s *Server) Start() error { panic("stub") }

// Addr is the bound Kafka listener address.
func (s *Server) Addr() net.Addr { panic("stub") }

// MetricsAddr is the bound metrics/admin HTTP address (nil if disabled).
func (s *Server) MetricsAddr() net.Addr { panic("stub") }

// Ready reports whether logs are recovered and the listener is serving.
func (s *Server) Ready() bool { panic("stub") }

// Shutdown stops accepting, finishes in-flight requests (until ctx ends),
// flushes every log, writes checkpoints and the clean-shutdown marker.
func (s *Server) Shutdown(ctx context.Context) error { panic("stub") }
