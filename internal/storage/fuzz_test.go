package storage

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func FuzzParseOffsetIndex(f *testing.F) {
	ok := make([]byte, 24)
	for i := 0; i < 3; i++ {
		binary.BigEndian.PutUint32(ok[i*8:], uint32(i*10))
		binary.BigEndian.PutUint32(ok[i*8+4:], uint32(i*4096))
	}
	f.Add(ok, int64(1<<20))
	f.Add(make([]byte, 16), int64(100))
	f.Add([]byte{1, 2, 3}, int64(5))
	f.Fuzz(func(t *testing.T, data []byte, logSize int64) {
		buf, err := ParseOffsetIndex(data, logSize)
		if err != nil {
			return
		}
		// Every lookup lands on an entry at or below the target.
		for _, target := range []int64{0, 1, 100, 1 << 30} {
			rel, pos := lookupOffsetIndex(buf, target)
			if int64(rel) > target || pos < 0 || (logSize >= 0 && int64(pos) >= logSize && len(buf) > 0 && pos != 0) {
				t.Fatalf("lookup %d -> (%d,%d)", target, rel, pos)
			}
		}
	})
}

func FuzzParseTimeIndex(f *testing.F) {
	ok := make([]byte, 24)
	binary.BigEndian.PutUint64(ok, 100)
	binary.BigEndian.PutUint32(ok[8:], 3)
	binary.BigEndian.PutUint64(ok[12:], 200)
	binary.BigEndian.PutUint32(ok[20:], 9)
	f.Add(ok)
	f.Add(make([]byte, 36))
	f.Add([]byte("garbage!"))
	f.Fuzz(func(t *testing.T, data []byte) {
		buf, err := ParseTimeIndex(data)
		if err != nil {
			return
		}
		prev := int32(-1)
		for _, ts := range []int64{-1, 0, 150, 1 << 62} {
			rel, found := lookupTimeIndex(buf, ts)
			if found && rel < 0 {
				t.Fatalf("negative offset")
			}
			_ = prev
		}
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\ntopic 0 100\nother-topic 3 5\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("1\n1\na 1 1\n"))
	f.Add([]byte("0\n1\na b c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ents, err := ParseCheckpoint(data)
		if err != nil {
			return
		}
		// A parsed file re-renders to something that parses the same.
		again, err := ParseCheckpoint(FormatCheckpoint(ents))
		if err != nil || len(again) != len(ents) {
			t.Fatalf("round trip: %v", err)
		}
		for i := range ents {
			if again[i] != ents[i] {
				t.Fatalf("round trip entry %d: %+v vs %+v", i, again[i], ents[i])
			}
		}
	})
}

func FuzzParseSnapshot(f *testing.F) {
	ps := newProducerState()
	t := ps.begin()
	t.record(5, 1, batchMeta{firstSeq: 0, lastSeq: 4, firstOffset: 10, lastOffset: 14}, 99)
	t.commit()
	f.Add(ps.encodeSnapshot())
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := parseSnapshot(data)
		if err != nil {
			return
		}
		if _, err := parseSnapshot(ps.encodeSnapshot()); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
	})
}

func FuzzParsePartitionMetadata(f *testing.F) {
	f.Add(FormatPartitionMetadata([16]byte{1, 2, 3}))
	f.Add([]byte("version: 0\ntopic_id: zzz\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := ParsePartitionMetadata(data)
		if err != nil {
			return
		}
		back, err := ParsePartitionMetadata(FormatPartitionMetadata(id))
		if err != nil || back != id {
			t.Fatalf("round trip %x: %v", id, err)
		}
	})
}

func FuzzParseTxnIndex(f *testing.F) {
	f.Add(EncodeTxnIndex([]AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 6, LastStableOffset: 7}, {ProducerID: 9, FirstOffset: 3, LastOffset: 8, LastStableOffset: 2}}))
	f.Add(EncodeTxnIndex([]AbortedTxn{{ProducerID: 5, FirstOffset: 10, LastOffset: 10, LastStableOffset: 11}})[:20])
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		ents, err := ParseTxnIndex(data)
		if len(ents)*TxnEntrySize > len(data) {
			t.Fatalf("%d entries from %d bytes", len(ents), len(data))
		}
		enc := EncodeTxnIndex(ents)
		if !bytes.Equal(enc, data[:len(enc)]) {
			t.Fatal("entries are not a prefix of the input")
		}
		if err == nil && len(enc) != len(data) {
			t.Fatalf("accepted %d of %d bytes", len(enc), len(data))
		}
		back, err := ParseTxnIndex(enc)
		if err != nil || len(back) != len(ents) {
			t.Fatalf("re-parse of valid entries: %v", err)
		}
		for i := range back {
			if back[i] != ents[i] {
				t.Fatalf("round trip entry %d: %+v != %+v", i, back[i], ents[i])
			}
		}
	})
}
