package storage

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// TestScanRangeIndexSkipSameRange checks that skipping ahead through the
// offset index gives exactly the byte range of a header-by-header scan,
// for every start offset and a spread of maxBytes, in closed and active
// segments.
func TestScanRangeIndexSkipSameRange(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 300
	l := openTest(t, vfs.Default(), filepath.Join(t.TempDir(), "t-0"), cfg, true)
	defer l.Close()
	for i := 0; i < 120; i++ {
		mustAppend(t, l, mkBatch(t, 1+i%5, fmt.Sprint("v", i), 1000+int64(i)))
		if i == 60 {
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
	}
	v := l.v.Load()
	hdr := make([]byte, record.HeaderSize)
	for _, s := range v.segs {
		oi, _, err := s.indexes()
		if err != nil {
			t.Fatal(err)
		}
		idx := oi.snapshot()
		if len(idx) < 2*offsetEntrySize {
			t.Fatalf("segment %d: only %d index entries, the test needs several", s.base, len(idx)/offsetEntrySize)
		}
		f, err := s.acquire()
		if err != nil {
			t.Fatal(err)
		}
		limit := v.limitFor(s)
		last := l.LogEndOffset()
		for off := s.base; off < last; off++ {
			_, p := lookupOffsetIndex(idx, off-s.base)
			for _, maxBytes := range []int64{1, 70, 300, 777, 2000, 5000, 1 << 20} {
				for _, minOne := range []bool{false, true} {
					ws, we, werr := scanRange(f, hdr, nil, int64(p), limit, off, maxBytes, minOne)
					gs, ge, gerr := scanRange(f, hdr, idx, int64(p), limit, off, maxBytes, minOne)
					if ws != gs || we != ge || (werr == nil) != (gerr == nil) {
						t.Fatalf("segment %d offset %d maxBytes %d minOne %v: with index (%d, %d, %v), without (%d, %d, %v)",
							s.base, off, maxBytes, minOne, gs, ge, gerr, ws, we, werr)
					}
				}
			}
		}
		f.Release()
	}
}
