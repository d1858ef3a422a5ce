package broker

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// TestNewPartitionDirsDurableBeforeFirstRecord: after CreateTopics the
// background pass (readyNewPartitions) makes the new partitions'
// directories, partition.metadata and leader epoch checkpoints durable
// with one SyncFS, so a partition's first acknowledged record fsyncs its
// segment file only; a power cut then keeps the record with its epoch
// entry, and the partitions never written.
func TestNewPartitionDirsDurableBeforeFirstRecord(t *testing.T) {
	fsys := vfs.NewCrashFS()
	b := openCrashBroker(t, fsys)
	var mu sync.Mutex
	var ops []string
	hook := func(op, name string) error {
		if op == "sync" || op == "syncdir" || op == "syncfs" {
			mu.Lock()
			ops = append(ops, op+" "+name)
			mu.Unlock()
		}
		return nil
	}
	fsys.SetHook(hook)
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "n", NumPartitions: 4, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	waitNewDirs(b)
	mu.Lock()
	if n := slices.IndexFunc(ops, func(s string) bool { return strings.HasPrefix(s, "syncfs ") }); n < 0 {
		t.Fatalf("no SyncFS after CreateTopics: %v", ops)
	}
	ops = nil
	mu.Unlock()
	appendOne(t, b, "n", 0, 3)
	fsys.SetHook(nil)
	for _, op := range ops {
		if !strings.HasPrefix(op, "sync ") || !strings.HasSuffix(op, storage.LogSuffix) {
			t.Fatalf("the first durable append synced more than its segment: %v", ops)
		}
	}
	if len(ops) == 0 {
		t.Fatal("the first durable append synced nothing")
	}

	img := fsys.Crash()
	b.Close()
	r := openCrashBroker(t, img)
	defer r.Close()
	for i := range int32(4) {
		p, err := r.Partition("n", i)
		if err != nil {
			t.Fatalf("partition n-%d after the power cut: %v", i, err)
		}
		want := int64(0)
		var epochs []storage.EpochEntry
		if i == 0 {
			want, epochs = 3, []storage.EpochEntry{{Epoch: 0, StartOffset: 0}}
		}
		if got := p.Log.HighWatermark(); got != want {
			t.Fatalf("n-%d holds %d records after the power cut, want %d", i, got, want)
		}
		if got := p.Log.LeaderEpochs(); !slices.Equal(got, epochs) {
			t.Fatalf("n-%d leader epochs after the power cut %v, want %v", i, got, epochs)
		}
	}
}
