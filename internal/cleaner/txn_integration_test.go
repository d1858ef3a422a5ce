package cleaner

import (
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
)

// appendMarker writes a COMMIT or ABORT marker for p and returns its
// offset.
func (h *harness) appendMarker(p producer, commit bool) int64 {
	h.t.Helper()
	off, err := h.log.AppendMarker(p.id, p.epoch, 0, commit, 0)
	if err != nil {
		h.t.Fatalf("append marker: %v", err)
	}
	return off
}

// appendP appends one batch of producer p (advancing its sequence) and
// returns the offset of its first record.
func (h *harness) appendP(p *producer, codec record.Compression, kvs ...kv) int64 {
	h.t.Helper()
	res, err := h.append(clientBatch(codec, *p, h.clock.Now().UnixMilli(), kvs))
	if err != nil {
		h.t.Fatalf("append for producer %d: %v", p.id, err)
	}
	p.seq += int32(len(kvs))
	return res.BaseOffset
}

// latestView returns key -> value of the last data record of each key.
func latestView(recs []stored) map[string]string {
	v := map[string]string{}
	for _, r := range recs {
		if r.Value == nil {
			delete(v, string(r.Key))
			continue
		}
		v[string(r.Key)] = string(r.Value)
	}
	return v
}

// markerOffsets returns the offsets of the control batches.
func markerOffsets(batches []record.Batch) []int64 {
	var out []int64
	for _, b := range batches {
		if b.IsControl() {
			out = append(out, b.BaseOffset())
		}
	}
	return out
}

// TestTransactionalCompaction: committed transactional data is
// deduplicated like other data, aborted data disappears regardless of
// keys (a key whose latest record was aborted keeps its last committed
// value), offsets are never renumbered, markers stay while their data
// does, and both producers keep producing after compaction and restarts.
func TestTransactionalCompaction(t *testing.T) {
	for _, cleanShutdown := range []bool{true, false} {
		h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
		mustAppend(t, h, kv{s("a"), s("1")}, kv{s("b"), s("1")}) // 0, 1
		p1 := producer{id: 501, epoch: 0, seq: 0, txn: true}
		p2 := producer{id: 502, epoch: 0, seq: 0, txn: true}
		h.appendP(&p1, record.Zstd, kv{s("a"), s("2")}, kv{s("c"), s("2")})                    // 2, 3
		h.appendP(&p2, record.LZ4, kv{s("a"), s("X")}, kv{s("b"), s("X")}, kv{s("d"), s("X")}) // 4-6
		commit1 := h.appendMarker(p1, true)                                                    // 7
		abort2 := h.appendMarker(p2, false)                                                    // 8
		mustAppend(t, h, kv{s("e"), s("1")})                                                   // 9
		if err := h.log.Roll(); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, h, kv{s("f"), s("active")})
		for round := 0; round < 3; round++ {
			h.clean()
			if st := h.cl.Status(h.topic); round == 0 && st[0].LastAbortedRemoved != 3 {
				t.Fatalf("status counts %d aborted records removed, want 3", st[0].LastAbortedRemoved)
			}
			h.clock.Advance(2 * time.Duration(compactCfg().DeleteRetentionMs) * time.Millisecond)
			recs, batches := h.readAll()
			var offs []int64
			for _, r := range recs {
				offs = append(offs, r.Offset)
				if string(r.Value) == "X" {
					t.Fatalf("round %d: aborted record at %d survived", round, r.Offset)
				}
			}
			if want := []int64{1, 2, 3, 9, 10}; !slices.Equal(offs, want) {
				t.Fatalf("round %d: offsets %v, want %v", round, offs, want)
			}
			v := latestView(recs)
			want := map[string]string{"a": "2", "b": "1", "c": "2", "e": "1", "f": "active"}
			for k, val := range want {
				if v[k] != val {
					t.Fatalf("round %d: key %s = %q, want %q (view %v)", round, k, v[k], val, v)
				}
			}
			if _, ok := v["d"]; ok {
				t.Fatalf("round %d: key d only written by an aborted transaction is visible", round)
			}
			// The COMMIT marker's data survives; the ABORT marker's
			// transaction keeps a batch (producer 502's last, emptied).
			if m := markerOffsets(batches); !slices.Equal(m, []int64{commit1, abort2}) {
				t.Fatalf("round %d: markers at %v, want [%d %d]", round, m, commit1, abort2)
			}
			for _, b := range batches {
				switch b.BaseOffset() {
				case 2:
					if !b.IsTransactional() || b.ProducerID() != 501 || b.NumRecords() != 2 {
						t.Fatalf("committed batch %+v", b.Header())
					}
				case 4:
					if !b.IsTransactional() || b.ProducerID() != 502 || b.NumRecords() != 0 || b.LastOffset() != 6 {
						t.Fatalf("aborted batch of an active producer not kept empty: %+v", b.Header())
					}
				}
			}
		}
		if cleanShutdown {
			h.restart()
		} else {
			h.cl.Close()
			h.log.Close()
			h.syncer.Close()
			h.open(false)
		}
		// Both producers continue their sequences in new transactions.
		h.appendP(&p1, record.None, kv{s("a"), s("3")})
		h.appendMarker(p1, true)
		h.appendP(&p2, record.None, kv{s("b"), s("3")})
		h.appendMarker(p2, false)
		if lso, hw := h.log.LastStableOffset(), h.log.HighWatermark(); lso != hw {
			t.Fatalf("LSO %d, HW %d after every transaction ended", lso, hw)
		}
		h.close()
	}
}

// TestCommitMarkerRemoval: once no batch of a committed transaction is
// left, its COMMIT marker gets a delete horizon and a round after the
// horizon removes it; the marker of a transaction with data stays.
func TestCommitMarkerRemoval(t *testing.T) {
	h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
	defer h.close()
	p := producer{id: 601, epoch: 0, seq: 0, txn: true}
	h.appendP(&p, record.None, kv{s("k"), s("t1")}) // 0
	c1 := h.appendMarker(p, true)                   // 1
	mustAppend(t, h, kv{s("k"), s("plain")})        // 2
	h.appendP(&p, record.None, kv{s("z"), s("t2")}) // 3
	c2 := h.appendMarker(p, true)                   // 4
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, kv{s("y"), s("active")})
	markers := func() ([]int64, []record.Batch) {
		_, batches := h.readAll()
		return markerOffsets(batches), batches
	}
	h.clean() // drops the first transaction's data; its marker saw it
	if m, _ := markers(); !slices.Equal(m, []int64{c1, c2}) {
		t.Fatalf("after round 1 markers %v", m)
	}
	h.clean() // no data of the first transaction: horizon stamped
	m, batches := markers()
	if !slices.Equal(m, []int64{c1, c2}) {
		t.Fatalf("after round 2 markers %v", m)
	}
	for _, b := range batches {
		if b.BaseOffset() == c1 && !b.HasDeleteHorizon() {
			t.Fatal("eligible COMMIT marker not stamped with a delete horizon")
		}
		if b.BaseOffset() == c2 && b.HasDeleteHorizon() {
			t.Fatal("COMMIT marker of a transaction with data stamped")
		}
	}
	h.clean() // before the horizon: still there
	if m, _ := markers(); !slices.Equal(m, []int64{c1, c2}) {
		t.Fatalf("marker removed before its horizon: %v", m)
	}
	h.clock.Advance(2 * time.Duration(compactCfg().DeleteRetentionMs) * time.Millisecond)
	h.clean()
	if m, _ := markers(); !slices.Equal(m, []int64{c2}) {
		t.Fatalf("after the horizon markers %v, want [%d]", m, c2)
	}
	if st := h.cl.Status(h.topic); st[0].TotalMarkersRemoved != 1 || st[0].LastMarkersRemoved != 1 {
		t.Fatalf("status counts %d markers removed (last round %d), want 1", st[0].TotalMarkersRemoved, st[0].LastMarkersRemoved)
	}
	recs, _ := h.readAll()
	if v := latestView(recs); v["k"] != "plain" || v["z"] != "t2" || v["y"] != "active" {
		t.Fatalf("view %v", v)
	}
	// The producer continues.
	h.appendP(&p, record.None, kv{s("z"), s("t3")})
	h.appendMarker(p, false)
}

// TestNeverCleanPastLastStableOffset: an open transaction bounds the
// cleanable range at the segment holding its first offset; once it ends,
// the rest is cleaned.
func TestNeverCleanPastLastStableOffset(t *testing.T) {
	h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
	defer h.close()
	mustAppend(t, h, kv{s("k"), s("0")}) // 0
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	p := producer{id: 701, epoch: 0, seq: 0, txn: true}
	h.appendP(&p, record.None, kv{s("k"), s("T")}) // 1: opens a transaction
	mustAppend(t, h, kv{s("k"), s("1")})           // 2
	mustAppend(t, h, kv{s("k"), s("2")})           // 3
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, kv{s("k"), s("3")}) // 4
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, kv{s("other"), s("active")}) // 5
	if lso := h.log.LastStableOffset(); lso != 1 {
		t.Fatalf("LSO %d, want 1", lso)
	}
	h.clean()
	st := h.cl.Status(h.topic)
	if len(st) != 1 || st[0].FirstUncleanable != 1 {
		t.Fatalf("status %+v, want first uncleanable 1", st)
	}
	recs, _ := h.readAll()
	var vals []string
	for _, r := range recs {
		if string(r.Key) == "k" {
			vals = append(vals, string(r.Value))
		}
	}
	// Nothing at or after the LSO was deduplicated (k=0 is the latest k of
	// the cleaned range, so it stays too).
	if want := []string{"0", "T", "1", "2", "3"}; !slices.Equal(vals, want) {
		t.Fatalf("k values %v, want %v", vals, want)
	}
	h.appendMarker(p, true) // 6
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, kv{s("other"), s("active2")})
	h.clean()
	recs, _ = h.readAll()
	vals = vals[:0]
	for _, r := range recs {
		if string(r.Key) == "k" {
			vals = append(vals, string(r.Value))
		}
	}
	if !slices.Equal(vals, []string{"3"}) {
		t.Fatalf("after the commit k values %v, want [3]", vals)
	}
	h.appendP(&p, record.None, kv{s("k"), s("4")})
	h.appendMarker(p, true)
}
