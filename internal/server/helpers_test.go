package server_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/servertest"
)

// startBroker starts a real broker (servertest) over dir ("" = a temp dir)
// with overrides over the test defaults; its clients wait at most 200ms in
// a fetch.
func startBroker(t testing.TB, dir string, overrides map[string]string) *servertest.Broker {
	t.Helper()
	return startBrokerLog(t, dir, overrides, nil)
}

// startBrokerLog is startBroker with the broker's log written to logw as
// JSON lines (nil: discarded, or stderr with STRATA_TEST_LOG set).
func startBrokerLog(t testing.TB, dir string, overrides map[string]string, logw io.Writer) *servertest.Broker {
	t.Helper()
	opts := servertest.Options{Dir: dir, Settings: overrides, ClientOpts: []kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)}}
	if logw != nil {
		opts.Logger = slog.New(slog.NewJSONHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return servertest.Start(t, opts)
}

// ctxT is a test's client context. It bounds a whole test body (a cluster
// test makes dozens of round trips, each waiting for metadata commits), so
// its deadline is one only a hung test reaches: under CI's load a test
// runs several times slower than on a quiet machine.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func createReq(topic string, partitions int32) broker.CreateTopicRequest {
	return broker.CreateTopicRequest{Name: topic, NumPartitions: partitions, ReplicationFactor: 1}
}
