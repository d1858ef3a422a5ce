package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// lieCount rewrites a batch's numRecords and lastOffsetDelta (CRC fixed).
func lieCount(b []byte, n int32) []byte {
	b = append([]byte(nil), b...)
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	record.Batch(b).SetCRC()
	return b
}

// TestAppendReadsEveryRecord: a batch whose records disagree with its
// header is refused (INVALID_RECORD) and nothing of its request is
// written, alone or after a good batch of the same request.
func TestAppendReadsEveryRecord(t *testing.T) {
	fsys := vfs.NewCrashFS()
	l := openTest(t, fsys, "/d/t-0", testConfig(), false)
	defer l.Close()
	mustAppend(t, l, mkBatch(t, 2, "ok", 10))
	for _, bad := range [][]byte{
		lieCount(mkBatch(t, 3, "x", 10), 5),
		lieCount(mkBatch(t, 3, "x", 10), 1<<31-1),
		lieCount(mkBatch(t, 3, "x", 10), 2),
		append(mkBatch(t, 1, "good", 10), lieCount(mkBatch(t, 3, "x", 10), 4)...),
	} {
		_, err := l.Append(bad, AppendOptions{})
		if !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("append: %v, want INVALID_RECORD", err)
		}
		if leo := l.LogEndOffset(); leo != 2 {
			t.Fatalf("log end offset %d after a refused append, want 2", leo)
		}
	}
	if got := readAll(t, l, 0); len(got) != 1 {
		t.Fatalf("%d batches stored, want 1", len(got))
	}
}

// TestAppendRecordTimestamps: each record's timestamp is checked against
// message.timestamp.before/after.max.ms (INVALID_TIMESTAMP with the
// record's index, as Kafka's LogValidator), and a batch's maxTimestamp is
// set to its largest record timestamp.
func TestAppendRecordTimestamps(t *testing.T) {
	now := time.Now().UnixMilli()
	cfg := testConfig()
	cfg.TimestampBeforeMaxMs = 60_000
	l := openTest(t, vfs.NewCrashFS(), "/d/ts-0", cfg, false)
	defer l.Close()

	// Records at now, now+1, now-3600000: the third is too old, although
	// the batch's base and max timestamps are fine.
	recs := []record.Record{{OffsetDelta: 0, Value: []byte("a")}, {OffsetDelta: 1, TimestampDelta: 1, Value: []byte("b")},
		{OffsetDelta: 2, TimestampDelta: -3_600_000, Value: []byte("c")}}
	b, err := record.Build(record.BatchHeader{LastOffsetDelta: 2, BaseTimestamp: now, MaxTimestamp: now + 1,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Append(b, AppendOptions{})
	if !errors.Is(err, kerr.InvalidTimestamp) || len(res.RecordErrors) != 1 || res.RecordErrors[0].Index != 2 {
		t.Fatalf("append: %v %+v, want INVALID_TIMESTAMP for record 2", err, res.RecordErrors)
	}

	// A wrong maxTimestamp is corrected (and the CRC with it).
	recs = recs[:2]
	b, _ = record.Build(record.BatchHeader{LastOffsetDelta: 1, BaseTimestamp: now, MaxTimestamp: now + 50_000,
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
	mustAppend(t, l, b)
	got := readAll(t, l, 0)
	if len(got) != 1 || got[0].MaxTimestamp() != now+1 {
		t.Fatalf("stored maxTimestamp %d, want %d", got[0].MaxTimestamp(), now+1)
	}
	if err := record.Validate(got[0]); err != nil {
		t.Fatalf("stored batch: %v", err)
	}
}

// TestWaitDurableWithoutDurable: with Config.Durable off (strata.durable.acks
// =false) the high watermark does not wait for fsync, but WaitDurable
// still returns only once the bytes are fsynced: a power cut right after
// it keeps them. Appends without WaitDurable are not fsynced (the trade
// the setting makes).
func TestWaitDurableWithoutDurable(t *testing.T) {
	fsys := vfs.NewCrashFS()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.Durable = false
	syncer := NewSyncer(quiet)
	defer syncer.Close()
	l, err := Open("/d/nd-0", [16]byte{1, 2, 3}, cfg, false, Options{FS: fsys, Logger: quiet, Syncer: syncer})
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.Append(mkBatch(t, 3, "data", 10), AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hw := l.HighWatermark(); hw != 3 {
		t.Fatalf("high watermark %d, want 3 at once", hw)
	}
	if rp := l.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d: the append was fsynced without being asked to", rp)
	}
	if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if rp := l.RecoveryPoint(); rp < 3 {
		t.Fatalf("WaitDurable returned with recovery point %d, want 3", rp)
	}
	img := fsys.Crash()
	l.Close()
	l2 := openTest(t, img, "/d/nd-0", cfg, false)
	defer l2.Close()
	if got := readAll(t, l2, 0); len(got) != 1 || got[0].LastOffset() != 2 {
		t.Fatalf("after a power cut: %d batches", len(got))
	}
}
