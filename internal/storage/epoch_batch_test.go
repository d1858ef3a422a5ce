package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/vfs"
)

// epochKinds are the partition histories of epochRestartDir, by i%4:
//
//	0: records at epoch 1 (0..1), then epoch 2 assigned at the end, empty
//	1: no record, epoch 2 assigned at 0
//	2: records at epochs 1 and 2
//	3: records at epoch 1, then epoch 5 assigned at the end, empty; this
//	   node no longer leads it and the next start appends at epoch 1 (a
//	   follower taking the older leader's records)
const epochKinds = 4

// epochRestartDir returns a log dir of parts partitions (epochKinds) as a
// clean shutdown left it, and what was acknowledged.
func epochRestartDir(t *testing.T, parts int) (*vfs.CrashFS, map[int][]ackedBatch) {
	t.Helper()
	fsys := vfs.NewCrashFS()
	s, logs := openJournalDir(t, fsys, parts, testConfig(), 1<<20, false)
	acked := map[int][]ackedBatch{}
	app := func(p int, epoch int32) {
		b := mkBatch(t, 2, fmt.Sprint("e", epoch), 1)
		res, err := logs[p].Append(b, AppendOptions{LeaderEpoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		if err := logs[p].WaitDurable(context.Background(), res.LastOffset+1); err != nil {
			t.Fatal(err)
		}
		acked[p] = append(acked[p], ackedBatch{res.BaseOffset, b})
	}
	for p, l := range logs {
		switch p % epochKinds {
		case 0:
			app(p, 1)
			must(t, l.AssignEpoch(2))
		case 1:
			must(t, l.AssignEpoch(2))
		case 2:
			app(p, 1)
			app(p, 2)
		case 3:
			app(p, 1)
			must(t, l.AssignEpoch(5))
		}
	}
	closeAll(t, s, logs)
	return fsys, acked
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// epochAt is the epoch the history gives offset off (the latest entry
// starting at or before it), -1 when none.
func epochAt(hist []EpochEntry, off int64) int32 {
	e := int32(-1)
	for _, h := range hist {
		if h.StartOffset <= off {
			e = h.Epoch
		}
	}
	return e
}

// checkEpochHistory fails unless every batch of every log is stamped with
// the epoch its leader epoch history gives its base offset: a history
// that claims an epoch starts where records of another lie would answer
// OffsetsForLeaderEpoch wrongly and truncate replicas wrongly.
func checkEpochHistory(t *testing.T, what string, logs []*Log) {
	t.Helper()
	for i, l := range logs {
		hist := l.LeaderEpochs()
		for _, b := range readAll(t, l, l.LogStartOffset()) {
			if got := epochAt(hist, b.BaseOffset()); got != b.PartitionLeaderEpoch() {
				t.Fatalf("%s: partition %d: batch at %d has epoch %d, the history %v says %d",
					what, i, b.BaseOffset(), b.PartitionLeaderEpoch(), hist, got)
			}
		}
	}
}

// TestAssignEpochsCrashAtEveryStep: a restart after a clean shutdown
// opens the logs with DeferSync (trailing empty epochs dropped from
// memory, the files left as they are), gives the leaders back their
// epoch (2: equal to the files, nothing written), elects them at epoch 3
// in one AssignEpochs batch (tmp files, SyncFS, renames, SyncFS), then
// appends a round at epoch 3 (kind 3 at epoch 1). A power cut before
// every mutating step, on a file system that keeps directory changes
// only once synced (Crash) and on one that commits every rename before
// the renamed file's data (CrashEntriesFirst), loses nothing acknowledged
// and leaves every log openable with a history that matches its batches.
// Renaming before the first SyncFS fails the CrashEntriesFirst case (an
// empty checkpoint); appending without rewriting the stale file first
// fails kind 3 (the history keeps epoch 5 over records of epoch 1).
func TestAssignEpochsCrashAtEveryStep(t *testing.T) {
	const parts = 2 * epochKinds
	clean, acked0 := epochRestartDir(t, parts)
	// recovered: the checkpoints of kind 2 miss epoch 2, whose batch
	// lies past the recovery point, so the open adds it from the batches
	// (not a whole-log recovery, which would forgive a torn checkpoint)
	// and writes it at StartJournal: tmp, SyncFS, rename, SyncFS.
	recovered := clean.Clone()
	rps, err := ReadCheckpoint(recovered, "/data/"+RecoveryPointFile)
	must(t, err)
	for p := 2; p < parts; p += epochKinds {
		must(t, vfs.WriteFileAtomic(recovered, fmt.Sprintf("/data/j-%d/%s", p, LeaderEpochFile),
			FormatEpochCheckpoint([]EpochEntry{{1, 0}}), 0o644))
		for i := range rps {
			if rps[i].Partition == int32(p) {
				rps[i].Offset = 2
			}
		}
	}
	must(t, WriteCheckpoint(recovered, "/data/"+RecoveryPointFile, rps))
	var leaders []int
	for p := range parts {
		if p%epochKinds != 3 {
			leaders = append(leaders, p)
		}
	}
	assign := func(logs []*Log, epoch int32) {
		ls := make([]*Log, 0, len(leaders))
		eps := make([]int32, 0, len(leaders))
		for _, p := range leaders {
			ls = append(ls, logs[p])
			eps = append(eps, epoch)
		}
		AssignEpochs(ls, eps)
	}
	for _, c := range []struct {
		name  string
		base  *vfs.CrashFS
		image func(*vfs.CrashFS) *vfs.CrashFS
	}{
		{"power-cut", clean, (*vfs.CrashFS).Crash},
		{"entries-first", clean, (*vfs.CrashFS).CrashEntriesFirst},
		{"recovered/power-cut", recovered, (*vfs.CrashFS).Crash},
		{"recovered/entries-first", recovered, (*vfs.CrashFS).CrashEntriesFirst},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(crashAt int) (img *vfs.CrashFS, acked map[int][]ackedBatch, steps int, ops []string) {
				fsys := c.base.Clone()
				acked = snapshotAcked(acked0)
				cut := cutPowerAt(fsys, crashAt, c.image)
				s, logs, err := openDeferred(fsys, parts)
				if err == nil {
					assign(logs, 2)
					assign(logs, 3)
					appendRound(t, s, logs, "new", kindEpoch, cut, acked)
				}
				fsys.SetHook(nil)
				if crashAt >= cut.n && cut.img == nil {
					cut.img = c.image(fsys) // after the last step
				}
				if crashAt < 0 {
					if err != nil {
						t.Fatalf("start without a power cut: %v", err)
					}
					checkEpochHistory(t, "without a power cut", logs)
					for _, p := range leaders {
						if e := logs[p].LatestEpoch(); e != 3 {
							t.Fatalf("partition %d: latest epoch %d after the election, want 3", p, e)
						}
					}
				}
				for _, l := range logs {
					l.Close()
				}
				s.Close()
				return cut.img, acked, cut.n, cut.ops
			}
			_, _, steps, ops := run(-1)
			if w := strings.Count(strings.Join(ops, "\n"), LeaderEpochFile); w == 0 {
				t.Fatalf("no leader epoch checkpoint written: %v", ops)
			}
			for k := range steps + 1 {
				img, acked, _, _ := run(k)
				what := "power cut after the last step"
				if k < steps {
					what = fmt.Sprintf("power cut before step %d (%s)", k, ops[k])
				}
				s2, logs2, err := openDeferred(img, parts)
				if err != nil {
					t.Fatalf("start after a %s: %v", what, err)
				}
				checkAcked(t, what, logs2, acked)
				checkEpochHistory(t, what, logs2)
				closeAll(t, s2, logs2)
			}
			t.Logf("%d steps", steps)
		})
	}
}

// kindEpoch is the leader epoch of partition p's appends after the
// election: 3, or 1 for kind 3 (a follower still appending at its old
// epoch).
func kindEpoch(p int) int32 {
	if p%epochKinds == 3 {
		return 1
	}
	return 3
}

// TestAssignEpochsOps: a restart's epochs cost no per-partition fsync:
// opening with DeferSync writes no leader epoch checkpoint for partitions
// whose only change is a dropped empty epoch, giving back the same epoch
// writes nothing, and the election's batch is one tmp write and one
// rename per partition with records between two SyncFS of the log dir
// (an empty log's epoch waits for its first record). The next
// restart again writes nothing until its election: the election's entry
// replaced the empty epoch at the same offset (Kafka's assign), so the
// file equals the history the controller gives back.
func TestAssignEpochsOps(t *testing.T) {
	const parts = 2 * epochKinds
	base, _ := epochRestartDir(t, parts)
	fsys := base.Clone()
	var mu sync.Mutex
	ops := map[string]int{}
	fsys.SetHook(func(op, name string) error {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(name, LeaderEpochFile) || op == "syncfs" || op == "sync" || op == "syncdir" {
			ops[op]++
		}
		return nil
	})
	take := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		o := ops
		ops = map[string]int{}
		return o
	}
	for restart, epoch := range []int32{2, 3} {
		s, logs, err := openDeferred(fsys, parts)
		if err != nil {
			t.Fatal(err)
		}
		if got := take(); got["create"]+got["write"]+got["rename"]+got["sync"]+got["syncdir"] != 0 {
			t.Fatalf("restart %d: open + StartJournal: %v, want no checkpoint write and no fsync", restart, got)
		}
		// The leaders (kinds 0-2) get their epoch back: the files hold it.
		var leaders []*Log
		for i, l := range logs {
			if i%epochKinds != 3 {
				leaders = append(leaders, l)
			}
		}
		epochs := func(e int32) []int32 {
			out := make([]int32, len(leaders))
			for i := range out {
				out[i] = e
			}
			return out
		}
		for _, err := range AssignEpochs(leaders, epochs(epoch)) {
			must(t, err)
		}
		if got := take(); len(got) != 0 {
			t.Fatalf("restart %d: epoch %d again: %v, want nothing written", restart, epoch, got)
		}
		for _, err := range AssignEpochs(leaders, epochs(epoch+1)) {
			must(t, err)
		}
		// Empty logs (kind 1) write nothing: the file is left stale.
		withData := 0
		for _, l := range leaders {
			if l.LogEndOffset() > 0 {
				withData++
			}
		}
		got := take()
		if got["rename"] != withData || got["syncfs"] != 2 || got["sync"] != 0 || got["syncdir"] != 0 {
			t.Fatalf("restart %d: election of %d partitions (%d with records): %v, want %d renames between 2 syncfs, no fsync",
				restart, len(leaders), withData, got, withData)
		}
		for i, l := range leaders {
			if e := l.LatestEpoch(); e != epoch+1 {
				t.Fatalf("restart %d: leader %d: latest epoch %d, want %d", restart, i, e, epoch+1)
			}
		}
		closeAll(t, s, logs)
		take()
	}
}

// TestAssignEpochsFencesOlderEpoch: a leadership still serving the old
// epoch appends while an AssignEpochs batch makes the new epoch durable
// (here at the batch's first SyncFS). The append is refused
// (NOT_LEADER_OR_FOLLOWER, retriable), so no record stamped with the old
// epoch lands past the offset where the new epoch's entry starts, and
// OffsetForLeaderEpoch of the old epoch ends where its records end. On the
// code without the fence the record landed at the new epoch's start offset
// with the old epoch, and a consumer that read it was told its epoch ended
// before it (kgo: "lost records", re-read; TestStrataSIGKILL).
func TestAssignEpochsFencesOlderEpoch(t *testing.T) {
	fsys := vfs.NewCrashFS()
	s, logs := openJournalDir(t, fsys, 1, testConfig(), 1<<20, false)
	l := logs[0]
	for range 3 {
		res, err := l.Append(mkBatch(t, 2, "e0", 1), AppendOptions{LeaderEpoch: 0})
		must(t, err)
		must(t, l.WaitDurable(context.Background(), res.LastOffset+1))
	}
	start := l.LogEndOffset()
	var raced error
	var once sync.Once
	fsys.SetHook(func(op, name string) error {
		if op == "syncfs" {
			once.Do(func() {
				// The hook runs outside l.mu: append as a concurrent producer would.
				_, raced = l.Append(mkBatch(t, 2, "late", 1), AppendOptions{LeaderEpoch: 0})
			})
		}
		return nil
	})
	for _, err := range AssignEpochs([]*Log{l}, []int32{1}) {
		must(t, err)
	}
	fsys.SetHook(nil)
	if !errors.Is(raced, kerr.NotLeaderForPartition) {
		t.Fatalf("append at epoch 0 during the batch: %v, want NOT_LEADER_OR_FOLLOWER", raced)
	}
	if e, end := l.EndOffsetForEpoch(0); e != 0 || end != start {
		t.Fatalf("OffsetForLeaderEpoch(0) = epoch %d end %d, want 0 %d", e, end, start)
	}
	if _, err := l.Append(mkBatch(t, 2, "e1", 1), AppendOptions{LeaderEpoch: 0}); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append at epoch 0 after the batch: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	res, err := l.Append(mkBatch(t, 2, "e1", 1), AppendOptions{LeaderEpoch: 1})
	must(t, err)
	if res.BaseOffset != start {
		t.Fatalf("first record of epoch 1 at %d, want %d", res.BaseOffset, start)
	}
	closeAll(t, s, logs)
}
