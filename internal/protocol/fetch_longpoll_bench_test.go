package protocol

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetchLongPoll is issue 18's long poll over many partitions: a
// consumer's fetch over a topic of 1 or 1,000 partitions, none of which
// holds anything past the consumer's offset, so the fetch long-polls;
// once it is about to block (Server.fetchWaits) one record is appended to
// the next partition, which wakes it and is answered. "session" is an
// incremental fetch of a KIP-227 session (the common consumer case),
// "sessionless" a full fetch with session epoch -1 (every partition named
// and read each time). Durable acks are off (an fsync per op is not the
// fetch's cost). ns/op and allocs/op include the append; cpu-ns/op is
// the process's CPU time per op (getrusage), steadier than ns/op on a
// loaded machine.
//
//	go test ./internal/protocol -run '^$' -bench FetchLongPoll -benchmem
func BenchmarkFetchLongPoll(b *testing.B) {
	for _, n := range []int{1, 1000} {
		for _, mode := range []string{"session", "sessionless"} {
			b.Run("partitions="+strconv.Itoa(n)+"/"+mode, func(b *testing.B) { benchFetchLongPoll(b, n, mode == "session") })
		}
	}
}

func benchFetchLongPoll(b *testing.B, n int, session bool) {
	cfg, err := config.LoadBroker("", nil, map[string]string{"log.dirs": b.TempDir(), "strata.metrics.listener": "", "strata.durable.acks": "false"})
	if err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	br, err := broker.Open(cfg, logger)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if _, err := br.CreateTopic(broker.CreateTopicRequest{Name: "t", NumPartitions: int32(n), ReplicationFactor: 1}); err != nil {
		b.Fatal(err)
	}
	srv, err := New(Config{Broker: br, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	parts := make([]*broker.Partition, n)
	for i := range parts {
		parts[i], _ = br.Partition("t", int32(i))
	}
	val := make([]byte, 512)
	appendOne := func(p *broker.Partition) {
		h := recordtest.NoProducer
		h.PartitionLeaderEpoch, h.BaseTimestamp = 0, time.Now().UnixMilli()
		if _, err := p.Append(context.Background(), recordtest.Batch(h, record.Record{Value: val}), 1); err != nil {
			b.Error(err)
		}
	}
	// Every partition holds one record (a partition's first append also
	// writes its leader epoch checkpoint: not the fetch's cost), and the
	// consumer is past it.
	offsets := make([]int64, n)
	for i, p := range parts {
		appendOne(p)
		offsets[i] = 1
	}
	ctx := context.Background()
	fetch := func(id, epoch int32, named []int) *fetchReply {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 64<<20, 1, 10_000
		req.SessionID, req.SessionEpoch = id, epoch
		t := kmsg.NewFetchRequestTopic()
		t.Topic = "t"
		for _, i := range named {
			p := kmsg.NewFetchRequestTopicPartition()
			p.Partition, p.FetchOffset, p.PartitionMaxBytes = int32(i), offsets[i], 1<<20
			t.Partitions = append(t.Partitions, p)
		}
		req.Topics = append(req.Topics, t)
		rep, err := srv.handleFetch(ctx, nil, req)
		if err != nil {
			b.Fatal(err)
		}
		return rep.fetch
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	id, epoch := int32(0), int32(-1)
	var named []int
	if session {
		// Open the session with a fetch that does not wait.
		offsets[0] = 0
		fr := fetch(0, 0, all)
		if id = fr.sessionID; id == 0 {
			b.Fatal("no session")
		}
		fr.release()
		epoch, offsets[0] = 1, 1
		named = []int{0}
	}
	k, appended := 0, false
	srv.fetchWaits = func() {
		if !appended {
			appended = true
			appendOne(parts[k])
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k, appended = (i+1)%n, false
		if !session {
			named = all
		}
		fr := fetch(id, epoch, named)
		if fr.errorCode != 0 || fr.bytes == 0 || !appended {
			b.Fatalf("fetch %d: error %d, %d bytes, appended %v", i, fr.errorCode, fr.bytes, appended)
		}
		fr.release()
		offsets[k]++
		if session {
			epoch = nextEpoch(epoch)
			named = append(named[:0], k)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
