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
	"github.com/twmb/franz-go/pkg/kmsg"
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

// newFetchBenchTopic is the fetch benchmarks' fixture: topic "t" of n
// partitions, each holding one record of value, on a fresh broker with
// durable acks off (an fsync per op is not the fetch's cost; a
// partition's first append also writes its leader epoch checkpoint), and
// a protocol server over it.
func newFetchBenchTopic(tb testing.TB, n int, value []byte) (*Server, []*broker.Partition) {
	tb.Helper()
	br := openTestBroker(tb, map[string]string{"strata.durable.acks": "false"}, "t", int32(n))
	parts := make([]*broker.Partition, n)
	for i := range parts {
		var err error
		if parts[i], err = br.Partition("t", int32(i)); err != nil {
			tb.Fatal(err)
		}
		if err := appendValue(parts[i], value, 1); err != nil {
			tb.Fatal(err)
		}
	}
	return newTestServer(tb, br), parts
}

// fetchNamed sends srv one Fetch v12 (64 MiB at most, 1 MiB a partition,
// min bytes 1, max wait maxWait ms) of session id at epoch, naming the
// partitions named of topic "t" at offsets[i]; the caller releases the
// reply.
func fetchNamed(tb testing.TB, srv *Server, id, epoch, maxWait int32, named []int, offsets []int64) *fetchReply {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 64<<20, 1, maxWait
	req.SessionID, req.SessionEpoch = id, epoch
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "t"
	for _, i := range named {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes = int32(i), offsets[i], 1<<20
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	rep, err := srv.handleFetch(context.Background(), nil, req)
	if err != nil {
		tb.Fatal(err)
	}
	return rep.fetch
}
