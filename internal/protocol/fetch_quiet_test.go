package protocol

import (
	"context"
	"testing"

	"github.com/strata-io/strata/internal/broker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFetchSessionQuietPartitions: an incremental fetch does not read a
// partition whose last answer had nothing to read and that did not change
// since (fetchFill.unchanged), yet still answers every change of one: a
// record appended, a log start offset moved by DeleteRecords, leadership
// lost; and a partition the request names is always read.
func TestFetchSessionQuietPartitions(t *testing.T) {
	const n = 4
	br := openTestBroker(t, nil, "t", n)
	srv := newTestServer(t, br)
	parts := make([]*broker.Partition, n)
	for i := range parts {
		var err error
		if parts[i], err = br.Partition("t", int32(i)); err != nil {
			t.Fatal(err)
		}
	}
	appendOne := func(p *broker.Partition) {
		t.Helper()
		if err := appendValue(p, []byte("v"), -1); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range parts {
		appendOne(p)
	}
	id, epoch := int32(0), int32(0)
	// fetch sends the partitions named (index: fetch offset) and returns
	// the partitions answered, by index.
	type named map[int32]int64
	fetch := func(ps named) map[int32]fetchPart {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 1<<20, 1, 0
		req.SessionID, req.SessionEpoch = id, epoch
		tp := kmsg.NewFetchRequestTopic()
		tp.Topic = "t"
		for i, off := range ps {
			p := kmsg.NewFetchRequestTopicPartition()
			p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch = i, off, 1<<20, -1
			tp.Partitions = append(tp.Partitions, p)
		}
		req.Topics = append(req.Topics, tp)
		rep, err := srv.handleFetch(context.Background(), nil, req)
		if err != nil {
			t.Fatal(err)
		}
		fr := rep.fetch
		defer fr.release()
		if fr.errorCode != 0 {
			t.Fatalf("fetch: error %d", fr.errorCode)
		}
		id, epoch = fr.sessionID, nextEpoch(epoch)
		out := map[int32]fetchPart{}
		for _, ft := range fr.topics {
			for _, fp := range ft.parts {
				out[fp.partition] = fp
			}
		}
		return out
	}
	if got := fetch(named{0: 1, 1: 1, 2: 1, 3: 1}); len(got) != n {
		t.Fatalf("full fetch answered %d partitions, want %d", len(got), n)
	}
	if got := fetch(nil); len(got) != 0 {
		t.Fatalf("nothing changed, answered %v", got)
	}
	quiet := 0
	for _, sp := range srv.sessions.byID[id].parts {
		if sp.quiet != nil {
			quiet++
		}
	}
	if quiet != n {
		t.Fatalf("%d partitions marked quiet, want %d", quiet, n)
	}

	// A record appended: answered with it.
	appendOne(parts[2])
	if got := fetch(nil); len(got) != 1 || got[2].size == 0 || got[2].hw != 2 {
		t.Fatalf("after an append to partition 2: answered %+v, want partition 2 with its record", got)
	}
	// The log start offset moved: answered with it (the high watermark
	// did not move).
	if _, err := parts[1].DeleteRecords(1); err != nil {
		t.Fatal(err)
	}
	// (Partition 2, named at its new offset, is answered once too.)
	if got := fetch(named{2: 2}); len(got) != 2 || got[1].logStart != 1 || got[2].size != 0 {
		t.Fatalf("after DeleteRecords on partition 1: answered %+v, want partition 1 with log start 1 and partition 2 empty", got)
	}
	// Leadership lost: NOT_LEADER_OR_FOLLOWER.
	l := parts[3].Leadership()
	l.Leader, l.LeaderEpoch = l.Leader+1, l.LeaderEpoch+1
	parts[3].SetLeadership(l)
	if got := fetch(nil); len(got) != 1 || got[3].errorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("after partition 3 lost its leadership: answered %+v, want NOT_LEADER_OR_FOLLOWER for it", got)
	}
	// A named partition is read again (the client asks for it); the error
	// of partition 3 is answered again too.
	got := fetch(named{0: 1})
	if p0, ok := got[0]; !ok || len(got) != 2 || p0.hw != 1 {
		t.Fatalf("partition 0 named: answered %+v, want it", got)
	}
}
