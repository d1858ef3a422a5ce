package storage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/strata-io/strata/internal/vfs"
)

// quiet discards log output in tests.
var quiet = slog.New(slog.DiscardHandler)

// mkBatch builds a producer batch (baseOffset 0) of n records with values
// derived from tag, timestamps ts..ts+n-1.
func mkBatch(t testing.TB, n int, tag string, ts int64) []byte {
	t.Helper()
	return mkBatchP(t, n, tag, ts, -1, -1, -1)
}

func mkBatchP(t testing.TB, n int, tag string, ts int64, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{
			TimestampDelta: int64(i),
			Key:            []byte(fmt.Sprintf("k%d", i%7)),
			Value:          []byte(fmt.Sprintf("%s-%d", tag, i)),
		}
	}
	return recordtest.Batch(record.BatchHeader{PartitionLeaderEpoch: -1, BaseTimestamp: ts, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}, recs...)
}

// testConfig returns a small-segment config for tests.
func testConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4096
	c.SegmentIndexBytes = 1024
	c.IndexIntervalBytes = 256
	c.FileDeleteDelay = 0
	c.RetentionMs = -1
	return c
}

func openTest(t testing.TB, fsys vfs.FS, dir string, cfg Config, clean bool) *Log {
	t.Helper()
	l, err := Open(dir, [16]byte{1, 2, 3}, cfg, clean, Options{FS: fsys, Logger: quiet})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

// readAll reads every batch from offset from to the high watermark and
// returns the concatenated batch bytes.
func readAll(t testing.TB, l *Log, from int64) []record.Batch {
	t.Helper()
	var out []record.Batch
	off := from
	for {
		res, err := l.Read(off, 1<<16, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(res.Chunks) == 0 {
			res.Release()
			return out
		}
		for _, c := range res.Chunks {
			buf := make([]byte, c.Len)
			if _, err := c.File.File().ReadAt(buf, c.Pos); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			for len(buf) > 0 {
				b, rest, err := record.Next(buf)
				if err != nil {
					t.Fatalf("chunk at %d: %v", off, err)
				}
				if err := record.ValidateStored(b); err != nil {
					t.Fatalf("read garbage at %d: %v", off, err)
				}
				cp := append(record.Batch(nil), b...)
				out = append(out, cp)
				off = b.LastOffset() + 1
				buf = rest
			}
		}
		res.Release()
	}
}

func mustAppend(t testing.TB, l *Log, b []byte) AppendResult {
	t.Helper()
	res, err := l.Append(b, AppendOptions{LeaderEpoch: 1})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
		t.Fatalf("wait durable: %v", err)
	}
	return res
}

func sameBatch(a, b []byte) bool { return bytes.Equal(a, b) }
