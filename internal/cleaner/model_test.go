package cleaner

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/twmb/franz-go/pkg/kerr"
	"pgregory.net/rapid"
)

// modelRec is one record the model knows was appended.
type modelRec struct {
	key, val []byte
}

// TestCleanerModel drives a real storage.Log and Cleaner with random
// sequences of puts (every codec), tombstones, idempotent produces,
// transactions that commit or abort (left open across other actions),
// rolls, cleanings, clock jumps past delete.retention.ms and restarts.
// After every cleaning it checks that the latest-value-per-key view of the
// committed data equals the model (a key whose latest record was aborted
// keeps its last committed value), that the surviving records are a
// subsequence of the appended ones (same offsets, keys, values,
// timestamps), that no aborted record is left below the cleaned offset,
// and that the idempotent and transactional producers can keep producing.
func TestCleanerModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir := mustTempDir(rt)
		defer os.RemoveAll(dir)
		ccfg := DefaultConfig()
		ccfg.Backoff = time.Hour
		// A tiny map sometimes, so rounds end mid-range and must progress.
		ccfg.DedupeBufferSize = int64(rapid.SampledFrom([]int{24 * 4, 24 * 16, 1 << 20}).Draw(rt, "mapBytes"))
		h := newHarness(rt, dir, compactCfg(), ccfg, nil, nil)
		defer func() { h.close() }()

		appended := map[int64]modelRec{}
		var offsets []int64
		appendTS := map[int64]int64{}
		latest := map[string][]byte{} // key -> value (nil = tombstone)
		latestOff := map[string]int64{}
		var pending []int64 // offsets of the open transaction's records
		aborted := map[int64]bool{}
		tp := producer{id: 2000, epoch: 0, seq: 0, txn: true}
		keys := []string{"", "a", "b", "c", "d", "e", "f", "g"}
		pid := producer{id: 1000, epoch: 0, seq: 0}
		tsNext := int64(1_000_000)

		add := func(rt *rapid.T, p producer, tombstones bool) {
			codec := rapid.SampledFrom(codecs).Draw(rt, "codec")
			n := rapid.IntRange(1, 4).Draw(rt, "n")
			kvs := make([]kv, n)
			for i := range kvs {
				k := []byte(rapid.SampledFrom(keys).Draw(rt, "key"))
				var v []byte
				if !tombstones || !rapid.Bool().Draw(rt, "tomb") {
					v = []byte(rapid.StringMatching(`[a-z]{0,6}`).Draw(rt, "val"))
				}
				kvs[i] = kv{k, v}
			}
			tsNext += 10
			res, err := h.append(clientBatch(codec, p, tsNext, kvs))
			if err != nil {
				rt.Fatalf("append: %v", err)
			}
			for i, x := range kvs {
				o := res.BaseOffset + int64(i)
				appended[o] = modelRec{x.key, x.val}
				appendTS[o] = tsNext + int64(i)
				offsets = append(offsets, o)
				if p.txn {
					pending = append(pending, o)
					continue
				}
				latest[string(x.key)] = x.val
				latestOff[string(x.key)] = o
			}
		}
		// endTxn writes the open transaction's marker and applies (commit)
		// or forgets (abort) its records.
		endTxn := func(commit bool) {
			if len(pending) == 0 {
				return
			}
			h.appendMarker(tp, commit)
			for _, o := range pending {
				r := appended[o]
				if !commit {
					aborted[o] = true
					continue
				}
				// The later record of a key wins, whenever it was
				// committed.
				if off, ok := latestOff[string(r.key)]; !ok || o > off {
					latest[string(r.key)] = r.val
					latestOff[string(r.key)] = o
				}
			}
			pending = nil
		}

		check := func(rt *rapid.T) {
			recs, _ := h.readAll()
			view := map[string][]byte{}
			seen := map[string]bool{}
			last := int64(-1)
			for _, r := range recs {
				if r.Offset <= last {
					rt.Fatalf("offsets not increasing: %d after %d", r.Offset, last)
				}
				last = r.Offset
				m, ok := appended[r.Offset]
				if !ok {
					rt.Fatalf("offset %d was never appended", r.Offset)
				}
				if !bytes.Equal(m.key, r.Key) || (m.key == nil) != (r.Key == nil) ||
					!bytes.Equal(m.val, r.Value) || (m.val == nil) != (r.Value == nil) {
					rt.Fatalf("offset %d: got %q=%q want %q=%q", r.Offset, r.Key, r.Value, m.key, m.val)
				}
				if r.TS != appendTS[r.Offset] || r.Hdrs != 1 {
					rt.Fatalf("offset %d: timestamp %d want %d, %d headers", r.Offset, r.TS, appendTS[r.Offset], r.Hdrs)
				}
				if aborted[r.Offset] || slices.Contains(pending, r.Offset) {
					continue // not committed (yet)
				}
				view[string(r.Key)] = r.Value
				seen[string(r.Key)] = true
			}
			for k, v := range latest {
				got, ok := view[k]
				if v == nil {
					if ok && got != nil {
						rt.Fatalf("deleted key %q still has value %q", k, got)
					}
					continue
				}
				if !ok || got == nil || !bytes.Equal(got, v) {
					rt.Fatalf("key %q: view %q (present %v), model %q", k, got, ok, v)
				}
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"put":  func(rt *rapid.T) { add(rt, noProducer, false) },
			"tomb": func(rt *rapid.T) { add(rt, noProducer, true) },
			"idempotent": func(rt *rapid.T) {
				n := len(offsets)
				add(rt, pid, true)
				pid.seq += int32(len(offsets) - n)
			},
			"roll": func(rt *rapid.T) {
				if err := h.log.Roll(); err != nil {
					rt.Fatalf("roll: %v", err)
				}
			},
			"txnData": func(rt *rapid.T) {
				n := len(offsets)
				add(rt, tp, true)
				tp.seq += int32(len(offsets) - n)
			},
			"txnCommit": func(rt *rapid.T) { endTxn(true) },
			"txnAbort":  func(rt *rapid.T) { endTxn(false) },
			"clean": func(rt *rapid.T) {
				h.clean()
				check(rt)
				fd := h.cl.Status(h.topic)[0].FirstDirtyOffset
				recs, _ := h.readAll()
				for _, r := range recs {
					if aborted[r.Offset] && r.Offset < fd {
						rt.Fatalf("aborted record at %d survived a round that cleaned up to %d", r.Offset, fd)
					}
				}
			},
			"advance": func(rt *rapid.T) { h.clock.Advance(1500 * time.Millisecond) },
			"restart": func(rt *rapid.T) {
				h.restart()
				check(rt)
			},
			"restartRecovery": func(rt *rapid.T) {
				// Reopen through crash recovery (no clean-shutdown marker).
				h.close()
				h.open(false)
				check(rt)
			},
			"": check,
		})
		// The transactional producer continues without a sequence error.
		endTxn(true)
		add(rt, tp, false)
		endTxn(rapid.Bool().Draw(rt, "lastCommit"))
		// The idempotent producer continues without a sequence error.
		_, err := h.append(clientBatch(record.Zstd, pid, tsNext+10, []kv{{[]byte("a"), []byte("z")}}))
		if errors.Is(err, kerr.OutOfOrderSequenceNumber) {
			rt.Fatalf("idempotent producer after compaction: %v", err)
		}
		if err != nil {
			rt.Fatalf("final append: %v", err)
		}
	})
}
