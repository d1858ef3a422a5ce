package storage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// logModel is the in-memory reference: the batches appended, in order.
type logModel struct {
	batches  []record.Batch
	logStart int64
	minLeo   int64 // set by truncation below the log start
}

func (m *logModel) leo() int64 {
	if len(m.batches) == 0 {
		return m.minLeo
	}
	return max(m.minLeo, m.batches[len(m.batches)-1].LastOffset()+1)
}

// truncate mirrors Log.TruncateTo.
func (m *logModel) truncate(off int64) {
	if off >= m.leo() {
		return
	}
	for i, b := range m.batches {
		if b.LastOffset() >= off {
			m.batches = m.batches[:i]
			m.minLeo = max(min(b.BaseOffset(), off), m.logStart)
			return
		}
	}
	m.minLeo = max(off, m.logStart)
}

// visible returns the batches with lastOffset >= logStart.
func (m *logModel) visible() []record.Batch {
	for i, b := range m.batches {
		if b.LastOffset() >= m.logStart {
			return m.batches[i:]
		}
	}
	return nil
}

func (m *logModel) offsetForTimestamp(ts int64) (int64, int64, bool) {
	for _, b := range m.visible() {
		var off, t int64 = -1, -1
		b.ForEachRecord(func(r *record.Record) error {
			o := b.BaseOffset() + int64(r.OffsetDelta)
			rt := b.BaseTimestamp() + r.TimestampDelta
			if off < 0 && o >= m.logStart && rt >= ts {
				off, t = o, rt
			}
			return nil
		})
		if off >= 0 {
			return off, t, true
		}
	}
	return -1, -1, false
}

func TestLogModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fsys := vfs.NewCrashFS()
		dir := "/d/model-0"
		clk := clock.NewManual(time.Unix(1_700_000_000, 0))
		cfg := testConfig()
		cfg.SegmentBytes = int64(rapid.IntRange(300, 3000).Draw(rt, "segBytes"))
		cfg.IndexIntervalBytes = int32(rapid.IntRange(0, 400).Draw(rt, "interval"))
		cfg.SegmentIndexBytes = int32(rapid.IntRange(32, 512).Draw(rt, "indexBytes"))
		cfg.SegmentMs = time.Duration(rapid.IntRange(1, 100).Draw(rt, "segMs")) * time.Second
		if rapid.Bool().Draw(rt, "retMs") {
			cfg.RetentionMs = int64(rapid.IntRange(1000, 300000).Draw(rt, "retentionMs"))
		}
		if rapid.Bool().Draw(rt, "retBytes") {
			cfg.RetentionBytes = int64(rapid.IntRange(500, 5000).Draw(rt, "retentionBytes"))
		}
		open := func(clean bool) *Log {
			l, err := Open(dir, [16]byte{9}, cfg, clean, Options{FS: fsys, Clock: clk, Logger: quiet})
			if err != nil {
				rt.Fatalf("open clean=%v: %v", clean, err)
			}
			return l
		}
		l := open(false)
		defer func() { l.Close() }()
		m := &logModel{}
		tsBase := clk.Now().UnixMilli()

		check := func() {
			if l.LogEndOffset() != m.leo() {
				rt.Fatalf("leo %d want %d", l.LogEndOffset(), m.leo())
			}
			if l.LogStartOffset() != m.logStart {
				rt.Fatalf("log start %d want %d", l.LogStartOffset(), m.logStart)
			}
			if l.HighWatermark() != m.leo() {
				rt.Fatalf("hw %d want %d", l.HighWatermark(), m.leo())
			}
			got := readAll(t, l, m.logStart)
			want := m.visible()
			if len(got) != len(want) {
				rt.Fatalf("read %d batches want %d", len(got), len(want))
			}
			for i := range got {
				if string(got[i]) != string(want[i]) {
					rt.Fatalf("batch %d differs", i)
				}
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				n := rapid.IntRange(1, 6).Draw(rt, "n")
				ts := tsBase + int64(rapid.IntRange(-50, 2000).Draw(rt, "ts"))
				b := mkBatch(t, n, fmt.Sprint(len(m.batches)), ts)
				res, err := l.Append(b, AppendOptions{LeaderEpoch: 2})
				if err != nil {
					rt.Fatalf("append: %v", err)
				}
				if res.BaseOffset != m.leo() {
					rt.Fatalf("base %d want %d", res.BaseOffset, m.leo())
				}
				if err := l.WaitDurable(context.Background(), res.LastOffset+1); err != nil {
					rt.Fatal(err)
				}
				m.batches = append(m.batches, append(record.Batch(nil), b...))
			},
			"roll": func(rt *rapid.T) {
				if err := l.Roll(); err != nil {
					rt.Fatal(err)
				}
			},
			"maybeRoll": func(rt *rapid.T) {
				clk.Advance(time.Duration(rapid.IntRange(0, 200).Draw(rt, "advance")) * time.Second)
				if _, err := l.MaybeRoll(clk.Now()); err != nil {
					rt.Fatal(err)
				}
			},
			"readOffset": func(rt *rapid.T) {
				if m.leo() == m.logStart {
					return
				}
				off := rapid.Int64Range(m.logStart, m.leo()-1).Draw(rt, "off")
				maxBytes := int64(rapid.IntRange(1, 2000).Draw(rt, "maxBytes"))
				res, err := l.Read(off, maxBytes, true)
				if err != nil {
					rt.Fatalf("read %d: %v", off, err)
				}
				defer res.Release()
				if len(res.Chunks) != 1 {
					rt.Fatalf("read %d: %d chunks", off, len(res.Chunks))
				}
				c := res.Chunks[0]
				buf := make([]byte, c.Len)
				c.File.File().ReadAt(buf, c.Pos)
				first, _, err := record.Next(buf)
				if err != nil {
					rt.Fatalf("read %d: %v", off, err)
				}
				if first.BaseOffset() > off || first.LastOffset() < off {
					rt.Fatalf("read %d: first batch [%d,%d]", off, first.BaseOffset(), first.LastOffset())
				}
				if c.Len > maxBytes && c.Len != int64(first.Size()) {
					rt.Fatalf("read %d: %d bytes over max %d", off, c.Len, maxBytes)
				}
				for _, b := range m.batches {
					if b.BaseOffset() == first.BaseOffset() && string(b) != string(first) {
						rt.Fatalf("read %d: batch bytes differ", off)
					}
				}
			},
			"readTimestamp": func(rt *rapid.T) {
				ts := tsBase + int64(rapid.IntRange(-100, 2100).Draw(rt, "ts"))
				off, gotTs, ok, err := l.OffsetForTimestamp(ts)
				if err != nil {
					rt.Fatal(err)
				}
				wOff, wTs, wOk := m.offsetForTimestamp(ts)
				if ok != wOk || off != wOff || (ok && gotTs != wTs) {
					rt.Fatalf("OffsetForTimestamp(%d) = %d,%d,%v want %d,%d,%v", ts, off, gotTs, ok, wOff, wTs, wOk)
				}
			},
			"deleteRecords": func(rt *rapid.T) {
				to := rapid.Int64Range(m.logStart, m.leo()).Draw(rt, "to")
				ls, err := l.DeleteRecords(to)
				if err != nil {
					rt.Fatal(err)
				}
				if ls != to {
					rt.Fatalf("log start %d want %d", ls, to)
				}
				m.logStart = to
			},
			"retention": func(rt *rapid.T) {
				if _, err := l.ApplyRetention(clk.Now()); err != nil {
					rt.Fatal(err)
				}
				ls := l.LogStartOffset()
				if ls < m.logStart {
					rt.Fatalf("retention moved log start back: %d < %d", ls, m.logStart)
				}
				m.logStart = ls
			},
			"truncate": func(rt *rapid.T) {
				if m.leo() == m.logStart {
					return
				}
				off := rapid.Int64Range(m.logStart, m.leo()).Draw(rt, "truncTo")
				end, err := l.TruncateTo(off)
				if err != nil {
					rt.Fatalf("truncate to %d: %v", off, err)
				}
				m.truncate(off)
				if end != m.leo() {
					rt.Fatalf("truncate to %d: end %d want %d", off, end, m.leo())
				}
			},
			"restartClean": func(rt *rapid.T) {
				if err := l.Close(); err != nil {
					rt.Fatal(err)
				}
				l = open(true)
			},
			"powerCut": func(rt *rapid.T) {
				img := fsys.Crash()
				if rapid.Bool().Draw(rt, "torn") {
					seed := rapid.IntRange(0, 1000).Draw(rt, "tornSeed")
					img = fsys.CrashTorn(func(n int) int { return (seed * 7919) % (n + 1) })
				}
				l.Close()
				fsys = img
				l = open(false)
			},
			"": func(rt *rapid.T) { check() },
		})
	})
}
