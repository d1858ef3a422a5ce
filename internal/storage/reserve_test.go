package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/vfs"
)

// TestReserveRefusesAppends: appends (and cleaner output) stop with
// KAFKA_STORAGE_ERROR once they would reach into the free-space reserve,
// reads go on, and appends resume once a measure finds room again.
func TestReserveRefusesAppends(t *testing.T) {
	fsys := vfs.NewCrashFS()
	fsys.SetFreeSpace(10 << 20)
	r := NewReserve(fsys, "/d", 8<<20, nil)
	if r == nil || r.Room() != 2<<20 {
		t.Fatalf("reserve room = %d, want %d", r.Room(), 2<<20)
	}
	l, err := Open("/d/t-0", [16]byte{1}, DefaultConfig(), false, Options{FS: fsys, Reserve: r, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	val := make([]byte, 64<<10)
	batchOf := func(t *testing.T, v []byte) []byte {
		return recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, record.Record{Value: v})
	}
	// CrashFS does not shrink its free-space answer as files grow: keep
	// the refused appends from measuring again, so the room the first
	// measure left is what the appends share.
	r.last.Store(1 << 62)
	var appended int
	var refusal error
	for i := 0; i < 100; i++ {
		if _, err := l.Append(batchOf(t, val), AppendOptions{}); err != nil {
			refusal = err
			break
		}
		appended++
	}
	if refusal == nil || !errors.Is(refusal, kerr.KafkaStorageError) {
		t.Fatalf("after %d appends of 64 KiB with 2 MiB of room: error %v, want KAFKA_STORAGE_ERROR", appended, refusal)
	}
	if appended < 25 || appended > 32 {
		t.Errorf("%d appends of 64 KiB accepted with 2 MiB of room", appended)
	}
	// Reads of what was acknowledged go on (readers see what is durable:
	// wait for the sync round of the accepted appends).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.WaitDurable(ctx, int64(appended)); err != nil {
		t.Fatalf("accepted appends never became durable: %v", err)
	}
	if res, err := l.Read(0, 1<<20, true); err != nil || len(res.Chunks) == 0 {
		t.Fatalf("read on a log dir at its reserve: %v", err)
	} else {
		res.Release()
	}
	// Space freed (the file system is not enforced by CrashFS: the test
	// moves its answer): the next append measures again and succeeds.
	fsys.SetFreeSpace(100 << 20)
	r.last.Store(0) // the refused append's own measure is not rate-limited away
	if _, err := l.Append(batchOf(t, val), AppendOptions{}); err != nil {
		t.Fatalf("append after space was freed: %v", err)
	}
	// Cleaner output is refused the same way.
	fsys.SetFreeSpace(8 << 20)
	if err := r.Measure(); err != nil {
		t.Fatal(err)
	}
	w, err := l.NewCleanedSegment(0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if err := w.Append(batchOf(t, val)); !errors.Is(err, kerr.KafkaStorageError) {
		t.Errorf("cleaner output at the reserve: %v, want KAFKA_STORAGE_ERROR", err)
	}
}

// TestReserveNone: no reserve when it is 0 or the file system cannot tell
// its free space.
func TestReserveNone(t *testing.T) {
	fsys := vfs.NewCrashFS()
	if r := NewReserve(fsys, "/d", 1<<30, nil); r != nil {
		t.Errorf("reserve on a file system without free-space answers: %+v", r)
	}
	fsys.SetFreeSpace(1)
	if r := NewReserve(fsys, "/d", 0, nil); r != nil {
		t.Errorf("reserve of 0 bytes: %+v", r)
	}
	var r *Reserve
	if err := r.take(1 << 40); err != nil || r.Min() != 0 {
		t.Errorf("nil reserve: %v %d", err, r.Min())
	}
}
