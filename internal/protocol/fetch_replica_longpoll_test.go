package protocol

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/replica"
)

// replicaRig is one broker leading every partition of topic "t" with a
// second replica, broker follower, in the ISR (no follower runs: the
// test sends the follower's fetches itself), and a protocol server whose
// replica fetches run fetchWaits' action once they are about to block.
type replicaRig struct {
	tb    testing.TB
	br    *broker.Broker
	srv   *Server
	mgr   *replica.Manager
	parts []*broker.Partition
	reps  []*replica.Replica
	ends  []int64 // the follower's fetch offset per partition
}

const (
	rigFollower = 2
	rigEpoch    = 1
)

func newReplicaRig(tb testing.TB, n int) *replicaRig {
	cfg, err := config.LoadBroker("", nil, map[string]string{"log.dirs": tb.TempDir(), "strata.metrics.listener": "", "strata.durable.acks": "false"})
	if err != nil {
		tb.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	br, err := broker.Open(cfg, logger)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { br.Close() })
	if _, err := br.CreateTopic(broker.CreateTopicRequest{Name: "t", NumPartitions: int32(n), ReplicationFactor: 1}); err != nil {
		tb.Fatal(err)
	}
	local := br.NodeID()
	mgr := replica.NewManager(replica.ManagerConfig{Local: local, BrokerEpoch: func() int64 { return 1 }, Logger: logger,
		Dialer: noDialer{}, FetchBackoff: time.Hour})
	mgr.SetBrokers(map[int32]replica.Broker{local: {Epoch: 1}, rigFollower: {Epoch: 1}})
	mgr.Start()
	tb.Cleanup(mgr.Close)
	r := &replicaRig{tb: tb, br: br, mgr: mgr, ends: make([]int64, n)}
	st := replica.State{Leader: local, LeaderEpoch: rigEpoch, Replicas: []int32{local, rigFollower}, ISR: []int32{local, rigFollower}}
	for i := range n {
		p, err := br.Partition("t", int32(i))
		if err != nil {
			tb.Fatal(err)
		}
		rep := mgr.Apply(replica.TP{Topic: "t", Partition: int32(i)}, p.Log, st, 1)
		p.SetReplica(rep)
		r.parts, r.reps = append(r.parts, p), append(r.reps, rep)
		// Every partition holds one record (its first append also
		// writes the leader epoch checkpoint), which the follower has.
		r.append(i)
		r.ends[i] = 1
	}
	if r.srv, err = New(Config{Broker: br, Logger: logger}); err != nil {
		tb.Fatal(err)
	}
	return r
}

var rigValue = make([]byte, 512)

func (r *replicaRig) append(i int) {
	h := recordtest.NoProducer
	h.PartitionLeaderEpoch, h.BaseTimestamp = rigEpoch, time.Now().UnixMilli()
	if _, err := r.parts[i].Append(context.Background(), recordtest.Batch(h, record.Record{Value: rigValue}), 1); err != nil {
		r.tb.Fatal(err)
	}
}

// fetch sends the follower's Fetch (v12, every partition from r.ends,
// min bytes 1) with maxWait; once it is about to block it runs onWait
// (once). It returns the reply (the caller releases it) and whether it
// blocked.
func (r *replicaRig) fetch(maxWait int32, onWait func()) (*fetchReply, bool) {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID = 12, rigFollower
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 64<<20, 1, maxWait
	req.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = "t"
	for i, end := range r.ends {
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes = int32(i), end, 1<<20
		p.CurrentLeaderEpoch, p.LastFetchedEpoch, p.LogStartOffset = rigEpoch, rigEpoch, -1
		t.Partitions = append(t.Partitions, p)
	}
	req.Topics = append(req.Topics, t)
	waited := false
	r.srv.fetchWaits = func() {
		if !waited {
			waited = true
			if onWait != nil {
				onWait()
			}
		}
	}
	defer func() { r.srv.fetchWaits = nil }()
	rep, err := r.srv.handleFetch(context.Background(), nil, req)
	if err != nil {
		r.tb.Fatal(err)
	}
	return rep.fetch, waited
}

// BenchmarkReplicaFetchLongPoll is issue 18's long poll on the leader's
// follower path: a follower's Fetch over 1 or 1,000 partitions it has
// all of, so the fetch long-polls; once it is about to block
// (Server.fetchWaits) one record is appended to the next partition,
// which wakes it and is answered. cpu-ns/op is the process's CPU time
// per op (getrusage; includes the append), steadier than ns/op on a
// loaded machine.
//
//	go test ./internal/protocol -run '^$' -bench ReplicaFetchLongPoll -benchmem
func BenchmarkReplicaFetchLongPoll(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run("partitions="+strconv.Itoa(n), func(b *testing.B) {
			r := newReplicaRig(b, n)
			k := 0
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k = (i + 1) % n
				fr, waited := r.fetch(10_000, func() { r.append(k) })
				if fr.hasError || fr.bytes == 0 || !waited {
					b.Fatalf("fetch %d: error %v, %d bytes, waited %v", i, fr.hasError, fr.bytes, waited)
				}
				fr.release()
				r.ends[k]++
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// noDialer reaches no broker: the rig's leader, made a follower, fetches
// from nowhere.
type noDialer struct{}

func (noDialer) Dial(context.Context, int32, int) (replica.Conn, error) {
	return nil, errors.New("no broker in this test")
}
func (noDialer) Forget(int32, int) {}

// waiters is how many waiters each partition's log holds.
func (r *replicaRig) waiters() []int {
	n := make([]int, len(r.parts))
	for i, p := range r.parts {
		n[i] = p.Log.Waiters()
	}
	return n
}

// TestReplicaFetchLongPoll: a follower's long poll (issue 18: one waiter
// on the log ends of its partitions) is answered by a record appended to
// any of them, with only that partition's record; by a leadership change
// or a deletion at once with the partition's error (Kafka's
// ReplicaManager completes delayed fetches of a partition it stops
// leading); a fetch with max wait 0 (the replica layer's pipelined
// DurableEndTag fetches) is answered without waiting. No waiter is left on
// any log once the fetch is answered.
func TestReplicaFetchLongPoll(t *testing.T) {
	none := []int{0, 0, 0}
	answer := func(r *replicaRig, fr *fetchReply) map[int32]fetchPart {
		t.Helper()
		defer fr.release()
		if len(fr.topics) != 1 || len(fr.topics[0].parts) != len(r.parts) {
			t.Fatalf("answered %d topics", len(fr.topics))
		}
		out := map[int32]fetchPart{}
		for _, fp := range fr.topics[0].parts {
			fp.read, fp.chunks = nil, nil
			out[fp.partition] = fp
		}
		if w := r.waiters(); !equalInts(w, none) {
			t.Fatalf("waiters after the fetch: %v, want none", w)
		}
		return out
	}
	t.Run("append", func(t *testing.T) {
		r := newReplicaRig(t, 3)
		fr, waited := r.fetch(long, func() {
			if w := r.waiters(); !equalInts(w, []int{1, 1, 1}) {
				t.Errorf("waiters while polling: %v, want [1 1 1]", w)
			}
			r.append(2)
		})
		got := answer(r, fr)
		if !waited || got[2].size == 0 || got[0].size != 0 || got[1].size != 0 || got[2].errorCode != 0 {
			t.Fatalf("waited %v, answered %+v: want the record of partition 2 only", waited, got)
		}
	})
	t.Run("no longer leader", func(t *testing.T) {
		r := newReplicaRig(t, 3)
		fr, waited := r.fetch(long, func() {
			st := replica.State{Leader: rigFollower, LeaderEpoch: rigEpoch + 1, Replicas: []int32{r.br.NodeID(), rigFollower}, ISR: []int32{rigFollower}}
			r.mgr.Apply(replica.TP{Topic: "t", Partition: 1}, r.parts[1].Log, st, 1)
		})
		got := answer(r, fr)
		if code := got[1].errorCode; !waited || (code != kerr.NotLeaderForPartition.Code && code != kerr.FencedLeaderEpoch.Code) {
			t.Fatalf("waited %v, answered %+v: want NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH for partition 1", waited, got)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		r := newReplicaRig(t, 3)
		fr, waited := r.fetch(long, func() {
			if err := r.br.DeleteTopic("t"); err != nil {
				t.Error(err)
			}
		})
		defer fr.release()
		if !waited || !fr.hasError {
			t.Fatalf("waited %v, error %v: want the deletion answered", waited, fr.hasError)
		}
		for _, fp := range fr.topics[0].parts {
			if fp.errorCode != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("partition %d: error %d, want UNKNOWN_TOPIC_OR_PARTITION", fp.partition, fp.errorCode)
			}
		}
		if w := r.waiters(); !equalInts(w, none) {
			t.Fatalf("waiters after the fetch: %v, want none", w)
		}
	})
	t.Run("max wait 0", func(t *testing.T) {
		r := newReplicaRig(t, 3)
		fr, waited := r.fetch(0, nil)
		got := answer(r, fr)
		if waited || len(got) != 3 {
			t.Fatalf("waited %v, answered %+v: want an answer at once", waited, got)
		}
	})
}
