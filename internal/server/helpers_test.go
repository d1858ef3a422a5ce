package server

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testBroker is a real broker on a random port over a temp log dir.
type testBroker struct {
	t   testing.TB
	dir string
	srv *Server
	ov  map[string]string
	// logw, when set, receives the broker's log as JSON lines.
	logw io.Writer
}

// startBroker starts a broker with overrides over test defaults.
func startBroker(t testing.TB, dir string, overrides map[string]string) *testBroker {
	t.Helper()
	return startBrokerLog(t, dir, overrides, nil)
}

// startBrokerLog is startBroker with the broker's log written to logw as
// JSON lines (nil: discarded, or stderr with STRATA_TEST_LOG set).
func startBrokerLog(t testing.TB, dir string, overrides map[string]string, logw io.Writer) *testBroker {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	tb := &testBroker{t: t, dir: dir, ov: overrides, logw: logw}
	tb.start()
	t.Cleanup(func() { tb.stop() })
	return tb
}

func (tb *testBroker) start() {
	tb.t.Helper()
	vals := map[string]string{
		"log.dirs":                             tb.dir,
		"listeners":                            "PLAINTEXT://127.0.0.1:0",
		"strata.metrics.listener":              "",
		"offsets.topic.num.partitions":         "2",
		"transaction.state.log.num.partitions": "2",
		"group.initial.rebalance.delay.ms":     "0",
	}
	for k, v := range tb.ov {
		vals[k] = v
	}
	cfg, err := config.LoadBroker("", nil, vals)
	if err != nil {
		tb.t.Fatalf("config: %v", err)
	}
	var w io.Writer = io.Discard
	if os.Getenv("STRATA_TEST_LOG") != "" {
		w = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if tb.logw != nil {
		logger = slog.New(slog.NewJSONHandler(tb.logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := New(cfg, logger)
	if err != nil {
		tb.t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		tb.t.Fatalf("Start: %v", err)
	}
	tb.srv = srv
}

func (tb *testBroker) stop() {
	if tb.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.srv.Shutdown(ctx); err != nil {
		tb.t.Errorf("Shutdown: %v", err)
	}
	tb.srv = nil
}

func (tb *testBroker) restart() {
	tb.stop()
	tb.start()
}

func (tb *testBroker) addr() string { return tb.srv.Addr().String() }

// client returns a kgo client (closed at test end).
func (tb *testBroker) client(opts ...kgo.Opt) *kgo.Client {
	tb.t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(tb.addr()), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Cleanup(cl.Close)
	return cl
}

func (tb *testBroker) admin() *kadm.Client {
	return kadm.NewClient(tb.client())
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func createReq(topic string, partitions int32) broker.CreateTopicRequest {
	return broker.CreateTopicRequest{Name: topic, NumPartitions: partitions, ReplicationFactor: 1}
}
