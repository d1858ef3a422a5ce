package replica_test

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/replica"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// The restart of a replica holding an uncommitted tail (the Session 5
// fault-matrix anomaly: acknowledged records lost after kill -9 of every
// node). Its log ends at 90 but only 0-29 were committed (the high
// watermark its leader had told it, checkpointed in the log dir's
// replication-offset-checkpoint); 30-89 were never held by the whole ISR.

const (
	reopenLocal    = 1
	reopenEpoch    = 42 // this incarnation's broker epoch
	reopenCommited = 30
	reopenEnd      = 90
	reopenDir      = "/data/rep-0"
)

// lastLife writes the replica's previous life into dir: 90 records at
// leader epoch 3, fsynced, the high watermark at 30, and a kill -9 (the
// log is never closed; withCheckpoint says whether a periodic checkpoint
// write ran before).
func lastLife(t *testing.T, withCheckpoint bool) *vfs.CrashFS {
	t.Helper()
	fsys := vfs.NewCrashFS()
	s := storage.NewSyncer(nil)
	l, err := storage.Open(reopenDir, [16]byte{3}, storage.DefaultConfig(), false, storage.Options{FS: fsys, Syncer: s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); s.Close() })
	l.SetHighWatermark(0, nil)
	for i := 0; i < reopenEnd/3; i++ {
		recs := []record.Record{{Value: []byte(fmt.Sprint(i))}, {Value: []byte("b")}, {Value: []byte("c")}}
		b := recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs...)
		if _, err := l.Append(b, storage.AppendOptions{LeaderEpoch: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(reopenCommited, nil)
	if withCheckpoint {
		if err := s.WriteCheckpoints(); err != nil {
			t.Fatal(err)
		}
	}
	// kill -9 (or a power cut: everything above was fsynced) now.
	return fsys.Crash()
}

// restarted reopens dir as after a crash and hands it to a new Manager
// with the partition in state st.
func restarted(t *testing.T, fsys vfs.FS, st meta.PartitionState) (*storage.Log, *replica.Replica, *replica.Manager, func(meta.PartitionState)) {
	t.Helper()
	s := storage.NewSyncer(nil)
	l, err := storage.Open(reopenDir, [16]byte{3}, storage.DefaultConfig(), false, storage.Options{FS: fsys, Syncer: s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); s.Close() })
	mgr := replica.NewManager(replica.ManagerConfig{
		Local: reopenLocal, BrokerEpoch: func() int64 { return reopenEpoch }, Durable: true,
		LagTimeMax: time.Minute, FetchWaitMax: 100 * time.Millisecond, FetchBackoff: 50 * time.Millisecond,
		Dialer: &replica.KgoDialer{Resolve: func(int32) (string, bool) { return "", false }},
		Logger: slog.New(slog.DiscardHandler),
	})
	mgr.Start()
	t.Cleanup(mgr.Close)
	var attached *replica.Replica
	host := func(replica.TP) (replica.Hosted, bool) {
		return replica.Hosted{Log: l, MinISR: 2, Attach: func(r *replica.Replica) { attached = r }}, true
	}
	apply := func(st meta.PartitionState) {
		mgr.Sync(&meta.View{
			Brokers: map[int32]*meta.Broker{1: {ID: 1, Epoch: reopenEpoch}, 2: {ID: 2, Epoch: 20}, 3: {ID: 3, Epoch: 30}},
			Topics:  map[string]*meta.Topic{"rep": {Name: "rep", ID: "rep-id", Partitions: 1}},
			Parts:   map[string][]meta.Partition{"rep-id": {{State: st, ModRevision: 7}}},
		}, host)
	}
	apply(st)
	if attached == nil {
		t.Fatal("the replica was not attached")
	}
	return l, attached, mgr, apply
}

func readable(t *testing.T, l *storage.Log) int64 {
	t.Helper()
	res, err := l.Read(0, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	var n int64
	for _, c := range res.Chunks {
		n += c.Len
	}
	if n == 0 {
		return 0
	}
	return l.HighWatermark()
}

// TestRestartedLeaderHidesUncommittedTail: elected leader after the
// restart (a clean election: it is in the ISR), the replica starts from the
// committed high watermark and exposes its tail only once every ISR member
// holds it (Kafka's makeLeader then maybeIncrementLeaderHW), never at
// once because its own log ends there.
func TestRestartedLeaderHidesUncommittedTail(t *testing.T) {
	for _, withCkpt := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoint=%v", withCkpt), func(t *testing.T) {
			img := lastLife(t, withCkpt)
			st := meta.PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: reopenLocal, LeaderEpoch: 4, PartitionEpoch: 6,
				ElectedBroker: reopenLocal, ElectedBrokerEpoch: reopenEpoch}
			l, r, _, _ := restarted(t, img, st)
			if e, ok := r.Leading(); !ok || e != 4 {
				t.Fatalf("not leading at epoch 4 (%v, %d)", ok, e)
			}
			want := int64(reopenCommited)
			if !withCkpt {
				want = 0 // nothing known committed: the log start
			}
			if hw := l.HighWatermark(); hw != want {
				t.Fatalf("restarted leader's high watermark %d, want %d (its log ends at %d with an uncommitted tail)", hw, want, l.LogEndOffset())
			}
			if !r.HighWatermarkLagsEpochStart() {
				t.Fatal("the restarted leader's high watermark lags its epoch start (90), yet ListOffsets would answer")
			}
			// One follower holding everything is not the ISR.
			fetch := func(id int32, epoch int64, off int64) {
				ans, err := r.ServeFetch(replica.FetchPart{Replica: id, BrokerEpoch: epoch, CurrentLeaderEpoch: 4, FetchOffset: off,
					LastFetchedEpoch: 3, LogStart: 0, MaxBytes: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				ans.Read.Release()
			}
			fetch(2, 20, reopenEnd)
			if hw := l.HighWatermark(); hw != want {
				t.Fatalf("high watermark %d after one of two followers fetched, want %d", hw, want)
			}
			fetch(3, 30, 60)
			if hw := l.HighWatermark(); hw != 60 {
				t.Fatalf("high watermark %d, want 60 (the ISR's lowest end)", hw)
			}
			fetch(3, 30, reopenEnd)
			if hw := l.HighWatermark(); hw != reopenEnd {
				t.Fatalf("high watermark %d, want %d once the ISR holds the tail", hw, reopenEnd)
			}
			if r.HighWatermarkLagsEpochStart() {
				t.Fatal("high watermark at the epoch start, still reported lagging")
			}
		})
	}
}

// TestRestartedFollowerReadsBounded: a follower after the restart serves
// consumers (KIP-392) nothing past what it knows committed until it hears
// from the leader: its checkpointed high watermark, or its log start.
func TestRestartedFollowerReadsBounded(t *testing.T) {
	for _, withCkpt := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpoint=%v", withCkpt), func(t *testing.T) {
			img := lastLife(t, withCkpt)
			st := meta.PartitionState{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2, LeaderEpoch: 4, PartitionEpoch: 6,
				ElectedBroker: 2, ElectedBrokerEpoch: 20}
			l, r, _, _ := restarted(t, img, st)
			if err := r.CheckFollowerRead(4); err != nil {
				t.Fatalf("follower read refused: %v", err)
			}
			want := int64(reopenCommited)
			if !withCkpt {
				want = 0
			}
			if hw := l.HighWatermark(); hw != want {
				t.Fatalf("restarted follower's high watermark %d, want %d (log end %d)", hw, want, l.LogEndOffset())
			}
			if got := readable(t, l); got > want {
				t.Fatalf("a consumer reads up to %d from the restarted follower, want at most %d", got, want)
			}
		})
	}
}
