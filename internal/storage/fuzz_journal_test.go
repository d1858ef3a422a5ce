package storage

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// FuzzJournalReplay writes an arbitrary record (kind, generation, segment
// base and position, payload; its length and CRC made right so the
// fuzzer gets past them, or raw bytes) at the start of a log dir's journal
// after a crash, followed by arbitrary bytes, and reopens the log dir: the
// journal is read and replayed into the partition. Opening either fails
// with an error or gives a log whose batches are valid and gap-free, and
// the batches the log held before (fsynced) read back byte for byte.
func FuzzJournalReplay(f *testing.F) {
	cfg := testConfig()
	const fileSize = 16 << 10
	fsys := vfs.NewCrashFS()
	s, logs := journalDir(f, fsys, 1, cfg, fileSize, false)
	var kept [][]byte
	for i := range 3 {
		b := mkBatch(f, 2, "kept", int64(i))
		mustAppend(f, logs[0], b)
		kept = append(kept, b)
	}
	l := logs[0]
	topicID, topic, partition := l.topicID, l.key.topic, l.key.partition
	closeAll(f, s, logs)
	base := fsys.Crash()
	st, err := base.Stat("/data/j-0/" + FileName(0, LogSuffix))
	if err != nil {
		f.Fatal(err)
	}
	segSize := st.Size()
	next := mkBatch(f, 3, "journaled", 9)
	binary.BigEndian.PutUint64(next, 6) // continues the log (3 batches of 2)
	f.Add(false, byte(jrnlKindBatches), uint64(1), int64(0), segSize, next, []byte(nil))
	f.Add(false, byte(jrnlKindBatches), uint64(1), int64(6), int64(0), next, []byte(nil))
	f.Add(false, byte(jrnlKindTruncate), uint64(1), int64(-1), int64(2), []byte(nil), []byte{0, 0, 0, 40})
	f.Add(false, byte(jrnlKindBatches), uint64(1), int64(0), segSize, next[:len(next)-3], []byte(nil))
	f.Add(true, byte(0), uint64(0), int64(0), int64(0), []byte{0, 0, 0, 200, 1, 2, 3, 4}, next)
	f.Fuzz(func(t *testing.T, raw bool, kind byte, gen uint64, segBase, segPos int64, payload, tail []byte) {
		img := base.Crash()
		var rec []byte
		if raw {
			rec = payload
		} else {
			rec = binary.BigEndian.AppendUint32(nil, uint32(jrnlFixedHeader-4+len(topic)+len(payload)))
			rec = append(rec, 0, 0, 0, 0)
			rec = binary.BigEndian.AppendUint64(rec, gen)
			rec = append(rec, kind)
			rec = append(rec, topicID[:]...)
			rec = binary.BigEndian.AppendUint32(rec, uint32(partition))
			rec = binary.BigEndian.AppendUint16(rec, uint16(len(topic)))
			rec = append(rec, topic...)
			rec = binary.BigEndian.AppendUint64(rec, uint64(segBase))
			rec = binary.BigEndian.AppendUint64(rec, uint64(segPos))
			rec = append(rec, payload...)
			sealJrec(rec, 0)
		}
		rec = append(rec, tail...)
		if len(rec) > fileSize {
			rec = rec[:fileSize]
		}
		jf, err := img.OpenFile(journalPath("/data", 0), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jf.WriteAt(rec, 0); err != nil {
			t.Fatal(err)
		}
		if err := jf.Sync(); err != nil {
			t.Fatal(err)
		}
		jf.Close()

		s := NewSyncer(quiet)
		if err := s.OpenJournal(img, "/data", fileSize); err != nil {
			return
		}
		defer s.Close()
		l, err := Open("/data/j-0", topicID, cfg, false, Options{FS: img, Syncer: s, Logger: quiet})
		if err != nil {
			return
		}
		defer l.Close()
		got := readAll(t, l, l.LogStartOffset())
		nextOff := int64(0)
		for i, b := range got {
			if b.BaseOffset() != nextOff {
				t.Fatalf("batch %d at %d, want %d", i, b.BaseOffset(), nextOff)
			}
			if err := record.Validate(b); err != nil {
				t.Fatalf("batch at %d: %v", b.BaseOffset(), err)
			}
			nextOff = b.LastOffset() + 1
			if i < len(kept) && string(b[12:]) != string(kept[i][12:]) {
				t.Fatalf("kept batch %d changed", i)
			}
		}
		if len(got) < len(kept) {
			t.Fatalf("%d batches after replay, %d were fsynced before", len(got), len(kept))
		}
	})
}
