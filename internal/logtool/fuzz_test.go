package logtool

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/record"
)

// FuzzScanner feeds arbitrary bytes as a segment: the scanner must never
// panic, must only yield batches that fit, and must stop with an error or
// exactly at the end.
func FuzzScanner(f *testing.F) {
	_, active := buildLogDir(f)
	if data, err := os.ReadFile(active); err == nil {
		f.Add(data)
		f.Add(data[:len(data)-5])
	}
	f.Add([]byte{})
	f.Add(make([]byte, 70))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc := NewScanner(bytes.NewReader(data), int64(len(data)))
		var end int64
		for sc.Next() {
			if sc.Position() != end || len(sc.Batch()) < record.HeaderSize || sc.Batch().Size() != len(sc.Batch()) {
				t.Fatalf("bad batch at %d", sc.Position())
			}
			end = sc.Offset()
			_ = record.ValidateStored(sc.Batch())
		}
		if sc.Err() == nil && end != int64(len(data)) {
			t.Fatalf("clean stop at %d of %d", end, len(data))
		}
	})
}

// FuzzIndexes parses arbitrary index bytes and checks them against a real
// segment layout: no panics, entries bounded by the input size.
func FuzzIndexes(f *testing.F) {
	dir := f.TempDir()
	w := newSegWriter(f, dir, 0, 0)
	for i := 0; i < 5; i++ {
		w.appendBatch(2, record.None, int64(i))
	}
	logPath := w.write()
	layout, err := scanLayout(logPath)
	if err != nil {
		f.Fatal(err)
	}
	for _, ext := range []string{ExtIndex, ExtTimeIndex} {
		data, _ := os.ReadFile(filepath.Join(dir, SegmentFileName(0, ext)))
		f.Add(data)
	}
	f.Add(make([]byte, 35))
	f.Fuzz(func(t *testing.T, data []byte) {
		oe, _ := ParseOffsetIndex(data)
		te, _ := ParseTimeIndex(data)
		xe, _ := ParseTxnIndex(data)
		if len(oe)*OffsetEntrySize > len(data) || len(te)*TimeEntrySize > len(data) || len(xe)*TxnEntrySize > len(data) {
			t.Fatal("more entries than bytes")
		}
		checkOffsetIndex("x", oe, layout)
		checkTimeIndex("x", te, layout)
	})
}
