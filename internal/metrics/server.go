package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server serves /metrics (Prometheus text format), /healthz (200 while the
// process runs), /readyz (200 when ready() reports true, else 503) and any
// handler added with Handle (the /v1 admin API).
type Server struct {
	addr string
	mux  *http.ServeMux
	srv  *http.Server

	mu     sync.Mutex
	ln     net.Listener
	done   chan struct{} // closed when Serve returns
	detail func() string // why not ready (nil: nothing more to say)
}

// NewServer builds a server for addr ("host:port"; port 0 = random). ready
// may be nil (always ready). /metrics serves reg's metrics and those of
// more (registries kept apart from reg, such as the per-partition series,
// which the console's sampler does not gather). It does not listen until
// Start.
func NewServer(addr string, reg *prometheus.Registry, ready func() bool, more ...prometheus.Gatherer) *Server {
	if ready == nil {
		ready = func() bool { return true }
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(append(prometheus.Gatherers{reg}, more...), promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	s := &Server{
		addr: addr,
		mux:  mux,
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
	}
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			s.mu.Lock()
			detail := s.detail
			s.mu.Unlock()
			if detail != nil {
				if d := detail(); d != "" {
					fmt.Fprintln(w, "not ready:", d)
					return
				}
			}
			fmt.Fprintln(w, "not ready")
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return s
}

// SetNotReadyDetail sets what /readyz adds after "not ready:" (e.g. the
// progress of log recovery); nil or "" adds nothing.
func (s *Server) SetNotReadyDetail(detail func() string) {
	s.mu.Lock()
	s.detail = detail
	s.mu.Unlock()
}

// Handle adds a handler (http.ServeMux pattern, e.g. "GET /v1/compaction").
// It may be called before or after Start.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// Start binds the listener (Listen) and serves (Serve).
func (s *Server) Start() error {
	if err := s.Listen(); err != nil {
		return err
	}
	return s.Serve()
}

// Listen binds the listener without serving yet, so a broker can claim its
// ports before it touches its data directory. Connections wait in the
// backlog until Serve.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("metrics server already listening")
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("metrics listener %s: %w", s.addr, err)
	}
	s.ln = ln
	return nil
}

// Serve serves the bound listener in a goroutine owned by the server
// (stopped by Close).
func (s *Server) Serve() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.ln == nil:
		return errors.New("metrics server: Serve before Listen")
	case s.done != nil:
		return errors.New("metrics server already serving")
	}
	ln := s.ln
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return nil
}

// Addr is the bound address (nil before Start).
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops the server, giving in-flight requests up to five seconds
// (a running compaction request may take longer: it is then cut off). A
// listener bound but not yet serving is closed.
func (s *Server) Close() error {
	s.mu.Lock()
	done, ln := s.done, s.ln
	s.mu.Unlock()
	if done == nil {
		if ln != nil {
			return ln.Close()
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-done
	return err
}
