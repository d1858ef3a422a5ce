package protocol

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

// testLogger discards every message.
func testLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openTestBroker opens a broker on a temporary log dir, without a metrics
// listener (settings add to or override that), with one topic of parts
// partitions; tb's cleanup closes it.
func openTestBroker(tb testing.TB, settings map[string]string, topic string, parts int32) *broker.Broker {
	tb.Helper()
	all := map[string]string{"log.dirs": tb.TempDir(), "strata.metrics.listener": ""}
	maps.Copy(all, settings)
	cfg, err := config.LoadBroker("", nil, all)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := broker.Open(cfg, testLogger())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	if _, err := b.CreateTopic(broker.CreateTopicRequest{Name: topic, NumPartitions: parts, ReplicationFactor: 1}); err != nil {
		tb.Fatal(err)
	}
	return b
}

// newTestServer is a protocol server (not listening) over b.
func newTestServer(tb testing.TB, b *broker.Broker) *Server {
	tb.Helper()
	srv, err := New(Config{Broker: b, Logger: testLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

// appendValue appends one record of value, without a producer, to p with
// acks (1 or -1).
func appendValue(p *broker.Partition, value []byte, acks int16) error {
	h := recordtest.NoProducer
	h.PartitionLeaderEpoch, h.BaseTimestamp = 0, time.Now().UnixMilli()
	_, err := p.Append(context.Background(), recordtest.Batch(h, record.Record{Value: value}), acks)
	return err
}
