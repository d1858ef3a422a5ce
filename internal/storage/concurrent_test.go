package storage

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// TestConcurrentReadersWriterRetention runs a writer, readers, retention
// and a tiny open-file cache at once (run it with -race): readers must
// only ever see valid batches at or after the offset they asked for.
func TestConcurrentReadersWriterRetention(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1500
	cfg.RetentionBytes = 6000
	cache := NewFileCache(2)
	syncer := NewSyncer(quiet)
	defer syncer.Close()
	l, err := Open(t.TempDir()+"/conc-0", [16]byte{}, cfg, false, Options{FS: vfs.Default(), Syncer: syncer, Files: cache, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 400; i++ {
			res, err := l.Append(mkBatch(t, 1+i%4, "c", int64(i)), AppendOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			if i%3 == 0 {
				l.WaitDurable(context.Background(), res.LastOffset+1)
			}
			if i%20 == 0 {
				l.ApplyRetention(time.Now())
			}
		}
		stop.Store(true)
	}()
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for !stop.Load() {
				start := l.LogStartOffset()
				hw := l.HighWatermark()
				if hw <= start {
					continue
				}
				off := start + int64(r)*(hw-start)/3
				res, err := l.Read(off, 700, true)
				if err != nil {
					// Retention may have moved the start past off meanwhile.
					if l.LogStartOffset() > off {
						continue
					}
					t.Error(err)
					return
				}
				for _, c := range res.Chunks {
					buf := make([]byte, c.Len)
					if _, err := c.File.File().ReadAt(buf, c.Pos); err != nil {
						t.Errorf("read chunk: %v", err)
					}
					first := true
					for len(buf) > 0 {
						b, rest, err := record.Next(buf)
						if err != nil || record.ValidateStored(b) != nil {
							t.Errorf("garbage at %d: %v", off, err)
							break
						}
						if first && b.LastOffset() < off {
							t.Errorf("batch [%d,%d] before %d", b.BaseOffset(), b.LastOffset(), off)
						}
						first = false
						buf = rest
					}
				}
				res.Release()
				l.OffsetForTimestamp(int64(r * 50))
				l.MaxTimestamp()
				l.Segments()
			}
		}(r)
	}
	wg.Wait()
}
