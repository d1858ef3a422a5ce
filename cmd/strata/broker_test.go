package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/server"
)

// startStrata runs an in-process PLAINTEXT Strata broker with small
// internal topics and extra settings, and returns its address; it stops
// when the test ends.
func startStrata(t *testing.T, extra map[string]string) string {
	t.Helper()
	return startTestBroker(t, "PLAINTEXT://127.0.0.1:0", extra)
}

// restartable is an in-process Strata broker that a test stops and starts
// again on the same address and log directory.
type restartable struct {
	t    *testing.T
	dir  string
	addr string
	srv  *server.Server
}

// startRestartable starts a restartable broker on a random port.
func startRestartable(t *testing.T) *restartable {
	t.Helper()
	r := &restartable{t: t, dir: t.TempDir(), addr: "127.0.0.1:0"}
	r.start()
	r.addr = r.srv.Addr().String()
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	r.t.Helper()
	cfg, err := config.LoadBroker("", nil, map[string]string{
		"listeners": "PLAINTEXT://" + r.addr, "strata.metrics.listener": "", "log.dirs": r.dir,
		"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1", "group.initial.rebalance.delay.ms": "0",
	})
	if err != nil {
		r.t.Fatal(err)
	}
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		r.t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.srv = srv
}

func (r *restartable) stop() {
	if r.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
	r.srv = nil
}
