package replica_test

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/replica"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// TestElectionBatchesEpochCheckpoints: one metadata change makes this
// broker leader of 1,000 partitions at once (the election after another
// broker failed). Their new leader epochs are recorded in one
// storage.AssignEpochs batch: two SyncFS of the log dir in all, no fsync
// of any leader-epoch-checkpoint (before: a tmp fsync and a directory
// fsync per partition, 2,000 fsyncs). Kafka's order holds: no partition
// leads at the new epoch before the second SyncFS made its checkpoint
// durable (checked from the file system's hook at each SyncFS), and a
// power cut right after the change finds every checkpoint naming the new
// epoch at the log end.
func TestElectionBatchesEpochCheckpoints(t *testing.T) {
	const (
		parts      = 1000
		local      = 1
		oldLeader  = 2
		oldEpoch   = 1
		newEpoch   = 2
		brokerEpch = 10
	)
	fsys := vfs.NewCrashFS()
	if err := fsys.MkdirAll("/data", 0o755); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	syncer := storage.NewSyncer(quiet)
	t.Cleanup(func() { syncer.Close() })
	logs := make([]*storage.Log, parts)
	for i := range logs {
		l, err := storage.Open(fmt.Sprintf("/data/rep-%d", i), [16]byte{7}, storage.DefaultConfig(), false,
			storage.Options{FS: fsys, Syncer: syncer, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		// One record at the old epoch: the new epoch's entry must be
		// written (an empty log's waits for its first record).
		b := recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1},
			record.Record{Value: []byte(fmt.Sprint(i))})
		if _, err := l.Append(b, storage.AppendOptions{LeaderEpoch: oldEpoch}); err != nil {
			t.Fatal(err)
		}
		if err := l.Flush(); err != nil { // nothing left for the syncer
			t.Fatal(err)
		}
		logs[i] = l
	}
	mgr := replica.NewManager(replica.ManagerConfig{
		Local: local, BrokerEpoch: func() int64 { return brokerEpch }, Durable: true,
		LagTimeMax: time.Minute, FetchWaitMax: 100 * time.Millisecond, FetchBackoff: time.Minute,
		Dialer: &replica.KgoDialer{Resolve: func(int32) (string, bool) { return "", false }},
		Logger: quiet,
	})
	mgr.Start()
	t.Cleanup(mgr.Close)
	view := func(leader, epoch int32) *meta.View {
		ps := make([]meta.Partition, parts)
		for i := range ps {
			ps[i] = meta.Partition{ModRevision: 7, State: meta.PartitionState{Replicas: []int32{2, 1, 3}, ISR: []int32{2, 1, 3},
				Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch, ElectedBroker: leader, ElectedBrokerEpoch: brokerEpch}}
		}
		return &meta.View{
			Brokers: map[int32]*meta.Broker{1: {ID: 1, Epoch: brokerEpch}, 2: {ID: 2, Epoch: brokerEpch}, 3: {ID: 3, Epoch: brokerEpch}},
			Topics:  map[string]*meta.Topic{"rep": {Name: "rep", ID: "rep-id", Partitions: parts}},
			Parts:   map[string][]meta.Partition{"rep-id": ps},
		}
	}
	host := func(tp replica.TP) (replica.Hosted, bool) {
		return replica.Hosted{Log: logs[tp.Partition], MinISR: 2}, true
	}
	mgr.Sync(view(oldLeader, oldEpoch), host) // following broker 2

	var mu sync.Mutex
	ops := map[string]int{}
	var early []string // partitions leading at the new epoch at a SyncFS
	fsys.SetHook(func(op, name string) error {
		if op == "syncfs" {
			for i := range parts {
				if e, ok := mgr.Replica(replica.TP{Topic: "rep", Partition: int32(i)}).Leading(); ok && e == newEpoch {
					mu.Lock()
					early = append(early, fmt.Sprintf("rep-%d at syncfs %d", i, ops["syncfs"]+1))
					mu.Unlock()
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case op == "sync" || op == "syncdir" || op == "syncfs":
			ops[op]++
		case strings.Contains(name, storage.LeaderEpochFile):
			ops[op+" "+storage.LeaderEpochFile]++
		}
		return nil
	})
	mgr.Sync(view(local, newEpoch), host) // broker 2 failed: this broker leads all
	fsys.SetHook(nil)

	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Fatalf("%d partitions led at epoch %d before their checkpoint was durable: %v (ops %v)", len(early), newEpoch, early[:min(len(early), 5)], ops)
	}
	if ops["syncfs"] != 2 || ops["sync"] != 0 || ops["syncdir"] != 0 || ops["rename "+storage.LeaderEpochFile] != parts {
		t.Fatalf("election of %d partitions: %v; want 2 syncfs, no fsync, %d checkpoint renames", parts, ops, parts)
	}
	crashed := fsys.Crash()
	for i := range parts {
		tp := replica.TP{Topic: "rep", Partition: int32(i)}
		if e, ok := mgr.Replica(tp).Leading(); !ok || e != newEpoch {
			t.Fatalf("%s: leading %v at epoch %d, want epoch %d", tp, ok, e, newEpoch)
		}
		ents := readEpochs(t, crashed, fmt.Sprintf("/data/rep-%d", i))
		if n := len(ents); n == 0 || ents[n-1] != (storage.EpochEntry{Epoch: newEpoch, StartOffset: 1}) {
			t.Fatalf("%s: checkpoint after a power cut holds %v, want epoch %d from offset 1 last", tp, ents, newEpoch)
		}
	}
}

// readEpochs parses the leader epoch checkpoint of dir in fsys.
func readEpochs(t *testing.T, fsys vfs.FS, dir string) []storage.EpochEntry {
	t.Helper()
	f, err := fsys.OpenFile(filepath.Join(dir, storage.LeaderEpochFile), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	ents, err := storage.ParseEpochCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	return ents
}
