package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/etcdnode"
	"github.com/strata-io/strata/internal/etcdnode/etcdtest"
	"github.com/strata-io/strata/internal/meta"
)

// TestCommitConcurrentBatches: a round's decisions are written in
// transactions of max-txn-ops, several at once (Driver.commit, issue 18).
// Every change lands, the revision returned is the highest written, and a
// transaction that loses a compare fails alone: the others' partitions
// change, and the round reports the conflict (ReconcileOnce then waits for
// the next view).
func TestCommitConcurrentBatches(t *testing.T) {
	st := meta.NewStore(etcdtest.Start(t), meta.DefaultKeys, 4)
	d := &Driver{Store: st, Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 30 // 8 transactions of at most 4
	tp := func(i int) meta.TopicPartition { return meta.TopicPartition{TopicID: "tid", Partition: int32(i)} }
	changes := make([]meta.Change, n)
	for i := range n {
		changes[i] = st.PartitionChange(tp(i), meta.PartitionState{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1}, 0)
	}
	applied, rev, err := d.commit(ctx, changes)
	if err != nil || applied != n {
		t.Fatalf("commit: %d applied, %v", applied, err)
	}
	v, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v.Rev != rev {
		t.Fatalf("commit returned revision %d, the store is at %d", rev, v.Rev)
	}
	mods := map[int32]int64{}
	for i := range n {
		p := v.Parts["tid"][i]
		if p.State.Leader != 1 || p.State.LeaderEpoch != 1 {
			t.Fatalf("partition %d after the commit: %+v", i, p.State)
		}
		mods[int32(i)] = p.ModRevision
	}
	// A second round, partition 5's expected revision stale: its
	// transaction (partitions 4-7) fails, every other partition moves.
	for i := range n {
		expect := mods[int32(i)]
		if i == 5 {
			expect--
		}
		changes[i] = st.PartitionChange(tp(i), meta.PartitionState{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 2}, expect)
	}
	applied, _, err = d.commit(ctx, changes)
	if !errors.Is(err, meta.ErrConflict) || applied != n-4 {
		t.Fatalf("commit with a stale compare: %d applied, %v; want %d and a conflict", applied, err, n-4)
	}
	if v, err = st.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		want := int32(2)
		if i >= 4 && i < 8 {
			want = 1
		}
		if got := v.Parts["tid"][i].State.LeaderEpoch; got != want {
			t.Errorf("partition %d: leader epoch %d, want %d", i, got, want)
		}
	}
}

// BenchmarkCommitElections writes the elections of 10,100 partitions (as
// a restarted broker's round, issue 18) in max-txn-ops transactions one
// after the other (writers=1, before) and up to commitWriters at once,
// on an embedded etcd member on disk. Each op rewrites every partition at
// its current revision.
//
//	go test ./internal/controller -run '^$' -bench CommitElections -benchtime 5x
func BenchmarkCommitElections(b *testing.B) {
	cli := etcdtest.Start(b)
	st := meta.NewStore(cli, meta.DefaultKeys, etcdnode.DefaultMaxTxnOps)
	d := &Driver{Store: st, Logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	const n = 10100
	tp := func(i int) meta.TopicPartition { return meta.TopicPartition{TopicID: "tid", Partition: int32(i)} }
	changes := make([]meta.Change, n)
	for i := range n {
		changes[i] = st.PartitionChange(tp(i), meta.PartitionState{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1}, 0)
	}
	if _, _, err := d.commit(ctx, changes); err != nil {
		b.Fatal(err)
	}
	epoch := int32(1)
	for _, writers := range []int{1, commitWriters} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				v, err := st.Load(ctx)
				if err != nil {
					b.Fatal(err)
				}
				epoch++
				for i := range n {
					changes[i] = st.PartitionChange(tp(i), meta.PartitionState{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: epoch}, v.Parts["tid"][i].ModRevision)
				}
				b.StartTimer()
				if applied, _, err := d.commitWith(ctx, changes, writers); err != nil || applied != n {
					b.Fatalf("%d applied: %v", applied, err)
				}
			}
		})
	}
}

// levelRecorder keeps the level of every record it handles.
type levelRecorder struct{ levels map[string][]slog.Level }

func (r *levelRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *levelRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.levels[rec.Message] = append(r.levels[rec.Message], rec.Level)
	return nil
}
func (r *levelRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *levelRecorder) WithGroup(string) slog.Handler      { return r }

// TestPartitionChangeLogLevels: as Kafka's controller logs the partition
// change records it replays, a reassignment's step is logged at info and
// any other change (a restart's 10,000 elections) at debug.
func TestPartitionChangeLogLevels(t *testing.T) {
	rec := &levelRecorder{levels: map[string][]slog.Level{}}
	d := &Driver{Logger: slog.New(rec)}
	d.logChange(Decision{Topic: "t", Reason: "leader election (elr)"})
	d.logChange(Decision{Topic: "t", Reason: "reassignment to [1 2]"})
	d.logChange(Decision{Topic: "t", Reason: "reassignment cancelled"})
	got := rec.levels["partition change"]
	want := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelInfo}
	if !slices.Equal(got, want) {
		t.Fatalf("levels %v, want %v", got, want)
	}
}
