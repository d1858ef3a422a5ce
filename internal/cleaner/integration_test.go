package cleaner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

func testCleanerCfg() Config {
	c := DefaultConfig()
	c.Backoff = time.Hour
	c.DedupeBufferSize = 1 << 20
	return c
}

func TestTombstoneLifecycle(t *testing.T) {
	h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
	defer h.close()
	mustAppend(t, h, kv{[]byte("a"), []byte("1")}, kv{[]byte("b"), []byte("1")})
	mustAppend(t, h, kv{[]byte("a"), nil})
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, kv{[]byte("c"), []byte("active")})
	h.clean()
	recs, batches := h.readAll()
	// a=1 is gone, b=1 stays, tombstone a stays with a horizon, c untouched.
	if len(recs) != 3 || string(recs[0].Key) != "b" || recs[1].Value != nil || recs[1].Offset != 2 || string(recs[2].Key) != "c" {
		t.Fatalf("after first clean: %+v", recs)
	}
	var tomb record.Batch
	for _, b := range batches {
		if b.BaseOffset() == 2 {
			tomb = b
		}
	}
	if tomb == nil || !tomb.HasDeleteHorizon() || tomb.BaseTimestamp() != h.clock.Now().UnixMilli()+1000 {
		t.Fatalf("tombstone batch has no horizon: %+v", tomb)
	}
	// A clean before the horizon keeps it; after it the tombstone goes.
	h.clock.Advance(500 * time.Millisecond)
	h.clean()
	if recs, _ = h.readAll(); len(recs) != 3 {
		t.Fatalf("tombstone removed before its horizon: %+v", recs)
	}
	h.clock.Advance(600 * time.Millisecond)
	h.clean()
	recs, _ = h.readAll()
	for _, r := range recs {
		if string(r.Key) == "a" {
			t.Fatalf("tombstone survived its horizon: %+v", recs)
		}
	}
	st := h.cl.Status("t")
	if len(st) != 1 || st[0].TotalTombstonesRemoved != 1 || st[0].Rounds != 3 {
		t.Fatalf("status %+v", st)
	}
	// A fetch at a compacted-away offset returns the next surviving batch.
	res, err := h.log.Read(0, 1<<20, true)
	if err != nil || len(res.Chunks) == 0 {
		t.Fatalf("read at 0: %v", err)
	}
	res.Release()
	if h.log.LogStartOffset() != 0 {
		t.Fatalf("log start moved to %d", h.log.LogStartOffset())
	}
}

func mustAppend(t *testing.T, h *harness, kvs ...kv) {
	t.Helper()
	if _, err := h.append(clientBatch(record.None, noProducer, h.clock.Now().UnixMilli(), kvs)); err != nil {
		t.Fatal(err)
	}
}

// overwriteAndRoll appends n values ("0" to n-1) of key "k" and rolls
// the segment: a closed segment in which the cleaner drops all but the
// last.
func overwriteAndRoll(t *testing.T, h *harness, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		mustAppend(t, h, kv{[]byte("k"), []byte(fmt.Sprint(i))})
	}
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
}

// TestTinyMapMakesProgress: a map holding 3 keys cleans 100 distinct keys
// in several rounds, each advancing the checkpoint, never stalling.
func TestTinyMapMakesProgress(t *testing.T) {
	ccfg := testCleanerCfg()
	ccfg.DedupeBufferSize = 24 * 4
	h := newHarness(t, t.TempDir(), compactCfg(), ccfg, nil, nil)
	defer h.close()
	for round := 0; round < 2; round++ {
		for i := 0; i < 100; i++ {
			mustAppend(t, h, kv{[]byte(fmt.Sprint("k", i)), []byte(fmt.Sprint(round))})
		}
	}
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	prev := int64(-1)
	for i := 0; ; i++ {
		if i > 200 {
			t.Fatal("no convergence")
		}
		h.clean()
		st := h.cl.Status("t")[0]
		if st.FirstDirtyOffset <= prev {
			t.Fatalf("checkpoint did not advance: %d -> %d", prev, st.FirstDirtyOffset)
		}
		prev = st.FirstDirtyOffset
		if st.FirstDirtyOffset >= st.FirstUncleanable {
			break
		}
	}
	recs, _ := h.readAll()
	if len(recs) != 100 {
		t.Fatalf("%d records survive, want 100", len(recs))
	}
	for _, r := range recs {
		if string(r.Value) != "1" {
			t.Fatalf("old value survived: %+v", r)
		}
	}
}

func TestCheckpointPersistsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, compactCfg(), testCleanerCfg(), nil, nil)
	defer func() { h.close() }()
	overwriteAndRoll(t, h, 10)
	h.clean()
	h.restart()
	ck, err := readCheckpoint(vfs.Default(), dir+"/"+CheckpointFile)
	if err != nil || ck[tp{"t", 0}] != 10 {
		t.Fatalf("checkpoint %v %v", ck, err)
	}
	if st := h.cl.Status("t")[0]; st.FirstDirtyOffset != 10 || st.DirtyBytes != 0 {
		t.Fatalf("status after restart %+v", st)
	}
	h.cl.Forget("t", 0)
	if ck, _ = readCheckpoint(vfs.Default(), dir+"/"+CheckpointFile); len(ck) != 0 {
		t.Fatalf("forget kept %v", ck)
	}
}

func TestBackgroundSelectionAndMetrics(t *testing.T) {
	cfg := compactCfg()
	cfg.MinCleanableDirtyRatio = 0.5
	reg := prometheus.NewRegistry()
	h := &harness{}
	*h = *newHarness(t, t.TempDir(), cfg, testCleanerCfg(), nil, nil)
	defer h.close()
	h.cl.Close()
	c, err := New(testCleanerCfg(), h.logDir, slices.Values([]Partition{{Topic: "t", Partition: 0, Log: h.log}}), h.logger, reg)
	if err != nil {
		t.Fatal(err)
	}
	h.cl = c
	for i := 0; i < 50; i++ {
		mustAppend(t, h, kv{[]byte(fmt.Sprint("k", i%5)), []byte("v")})
	}
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	c.Start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := c.Status("t")[0]
		if st.Rounds > 0 {
			if st.TotalRecordsRemoved != 45 {
				t.Fatalf("removed %d", st.TotalRecordsRemoved)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("background round never ran: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := counterValue(c.met.rounds); got != 1 {
		t.Fatalf("rounds metric %v", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"strata_cleaner_max_dirty_percent", "strata_cleaner_recopy_percent",
		"strata_cleaner_max_clean_time_secs", "strata_cleaner_max_buffer_utilization_percent",
		"strata_cleaner_uncleanable_partitions_count", "strata_cleaner_time_since_last_run_ms",
		"strata_cleaner_dead_thread_count", "strata_cleaner_panics_total", "strata_cleaner_partition_dirty_ratio"} {
		if !names[n] {
			t.Errorf("metric %s not exported", n)
		}
	}
}

func TestHTTPAdmin(t *testing.T) {
	h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
	defer h.close()
	overwriteAndRoll(t, h, 10)
	srv := httptest.NewServer(h.cl.HTTPHandler())
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/compaction/run?topic=t&partition=0", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var st []PartitionStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != 200 {
		t.Fatalf("run: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if len(st) != 1 || st[0].Rounds != 1 || st[0].LastRecordsRemoved != 9 || st[0].LastCleanTime == nil {
		t.Fatalf("run status %+v", st)
	}
	resp, err = http.Get(srv.URL + "/v1/compaction")
	if err != nil {
		t.Fatal(err)
	}
	var all []map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil || len(all) != 1 || all[0]["topic"] != "t" {
		t.Fatalf("get: %v %v", all, err)
	}
	resp.Body.Close()
	for _, q := range []string{"topic=nope", "", "topic=t&partition=x"} {
		resp, err = http.Post(srv.URL+"/v1/compaction/run?"+q, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 && resp.StatusCode != 400 {
			t.Fatalf("%q: status %d", q, resp.StatusCode)
		}
	}
}

// TestFailureIsRetriedAndReported: a round that panics is recovered,
// counted, reported in Status with the reason, and retried (not parked).
func TestFailureIsRetriedAndReported(t *testing.T) {
	h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
	defer h.close()
	overwriteAndRoll(t, h, 10)
	h.cl.hooks.beforeSwap = func(int64) { panic("boom") }
	err := h.cl.CleanNow(context.Background(), "t", 0)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("want panic error, got %v", err)
	}
	st := h.cl.Status("t")[0]
	if !st.Uncleanable || st.Failures != 1 || !strings.Contains(st.UncleanableReason, "boom") || st.NextRetry == nil {
		t.Fatalf("status %+v", st)
	}
	if counterValue(h.cl.met.panics) != 1 {
		t.Fatal("panic not counted")
	}
	recs, _ := h.readAll()
	if len(recs) != 10 {
		t.Fatalf("failed round changed the log: %d records", len(recs))
	}
	h.cl.hooks.beforeSwap = nil
	h.clean()
	if st := h.cl.Status("t")[0]; st.Uncleanable || st.Failures != 0 {
		t.Fatalf("not recovered: %+v", st)
	}
	if recs, _ = h.readAll(); len(recs) != 1 {
		t.Fatalf("%d records after retry", len(recs))
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// TestIdempotentProducerSurvivesCompaction: a producer's only batch is
// entirely superseded; the cleaner keeps it as an empty batch, and after a
// restart (with and without a clean shutdown) the producer continues its
// sequence without OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestIdempotentProducerSurvivesCompaction(t *testing.T) {
	for _, cleanShutdown := range []bool{true, false} {
		h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
		p := producer{id: 77, epoch: 3, seq: 0}
		if _, err := h.append(clientBatch(record.LZ4, p, 1, []kv{{[]byte("a"), []byte("1")}, {[]byte("b"), []byte("1")}})); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, h, kv{[]byte("a"), []byte("2")}, kv{[]byte("b"), []byte("2")})
		if err := h.log.Roll(); err != nil {
			t.Fatal(err)
		}
		mustAppend(t, h, kv{[]byte("c"), []byte("active")})
		h.clean()
		recs, batches := h.readAll()
		if len(recs) != 3 || recs[0].Offset != 2 {
			t.Fatalf("records %+v", recs)
		}
		if b := batches[0]; b.BaseOffset() != 0 || b.NumRecords() != 0 || b.LastOffset() != 1 || b.ProducerID() != 77 || len(b) != record.HeaderSize {
			t.Fatalf("producer batch not kept empty: %+v", b.Header())
		}
		if cleanShutdown {
			h.restart()
		} else {
			// Simulate a crash: reopen without the clean-shutdown path.
			h.cl.Close()
			h.log.Close()
			h.syncer.Close()
			h.open(false)
		}
		p.seq = 2
		if _, err := h.append(clientBatch(record.None, p, 2, []kv{{[]byte("a"), []byte("3")}})); err != nil {
			t.Fatalf("producer after compaction (clean shutdown %v): %v", cleanShutdown, err)
		}
		h.close()
	}
}

// TestFetchInCompactedGap: a read at an offset that was compacted away
// returns the next surviving batch, without error.
func TestFetchInCompactedGap(t *testing.T) {
	h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
	defer h.close()
	for i := 0; i < 5; i++ {
		mustAppend(t, h, kv{[]byte("k"), []byte(fmt.Sprint(i))})
	}
	mustAppend(t, h, kv{[]byte("other"), []byte("x")})
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, kv{[]byte("z"), []byte("active")})
	h.clean()
	res, err := h.log.Read(1, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	if len(res.Chunks) == 0 {
		t.Fatal("no data at a compacted offset")
	}
	ch := res.Chunks[0]
	buf := make([]byte, ch.Len)
	if _, err := ch.File.File().ReadAt(buf, ch.Pos); err != nil {
		t.Fatal(err)
	}
	b, _, err := record.Next(buf)
	if err != nil || b.LastOffset() < 1 || b.BaseOffset() != 4 {
		t.Fatalf("first batch at %d..%d, %v", b.BaseOffset(), b.LastOffset(), err)
	}
	if res.LogStartOffset != 0 {
		t.Fatalf("log start %d", res.LogStartOffset)
	}
}

// TestFlipDeleteToCompact: a topic switched from delete to compact is
// compacted from the next round; its old null-key records are dropped.
func TestFlipDeleteToCompact(t *testing.T) {
	cfg := compactCfg()
	cfg.Compact, cfg.Delete = false, true
	h := newHarness(t, t.TempDir(), cfg, testCleanerCfg(), nil, nil)
	defer h.close()
	for _, x := range []kv{{nil, []byte("nokey")}, {[]byte("k"), []byte("1")}, {[]byte("k"), []byte("2")}} {
		if _, err := h.log.Append(clientBatch(record.Snappy, noProducer, 1, []kv{x}), storage.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	if err := h.cl.CleanNow(context.Background(), "t", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete topic cleaned: %v", err)
	}
	if len(h.cl.Status("")) != 0 {
		t.Fatal("delete topic in status")
	}
	cfg.Compact = true
	h.log.UpdateConfig(cfg)
	h.clean()
	recs, _ := h.readAll()
	if len(recs) != 1 || string(recs[0].Value) != "2" {
		t.Fatalf("after flip: %+v", recs)
	}
	if st := h.cl.Status("t")[0]; st.LastRecordsRemoved != 2 {
		t.Fatalf("status %+v", st)
	}
}

// TestRetentionRaceAbortsWithoutFailure: retention removing a segment
// while a round cleans it aborts the round; that is not a failure.
func TestRetentionRaceAbortsWithoutFailure(t *testing.T) {
	cfg := compactCfg()
	cfg.Delete = true
	h := newHarness(t, t.TempDir(), cfg, testCleanerCfg(), nil, nil)
	defer h.close()
	for seg := 0; seg < 3; seg++ {
		for i := 0; i < 3; i++ {
			mustAppend(t, h, kv{[]byte("k"), []byte(fmt.Sprint(seg, i))})
		}
		if err := h.log.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	h.cl.hooks.beforeSwap = func(int64) {
		h.cl.hooks.beforeSwap = nil
		if _, err := h.log.DeleteRecords(3); err != nil {
			t.Error(err)
		}
		if _, err := h.log.ApplyRetention(h.clock.Now()); err != nil {
			t.Error(err)
		}
	}
	err := h.cl.CleanNow(context.Background(), "t", 0)
	if !errors.Is(err, errSegmentsChanged) {
		t.Fatalf("want an aborted round, got %v", err)
	}
	if st := h.cl.Status("t")[0]; st.Uncleanable || st.Failures != 0 {
		t.Fatalf("abort counted as failure: %+v", st)
	}
	h.clean()
	recs, _ := h.readAll()
	if len(recs) != 1 || string(recs[0].Value) != "2 2" {
		t.Fatalf("after retry: %+v", recs)
	}
}

func TestNewConfig(t *testing.T) {
	src := slices.Values([]Partition(nil))
	dir := t.TempDir()
	bad := []Config{
		{Enable: true, Threads: -1, DedupeBufferSize: 1 << 20},
		{Enable: true, Threads: 1, DedupeBufferSize: 0},
		{Enable: true, Threads: 4, DedupeBufferSize: 100},
	}
	for _, cfg := range bad {
		if _, err := New(cfg, dir, src, discardLogger(), nil); err == nil {
			t.Errorf("%+v: want error", cfg)
		}
	}
	// Zero threads, like Kafka, cleans nothing; CleanNow says so.
	c, err := New(Config{Enable: true, Threads: 0}, dir, src, discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	if err := c.CleanNow(context.Background(), "t", 0); !errors.Is(err, ErrDisabled) {
		t.Fatalf("want ErrDisabled, got %v", err)
	}
	c.Close()
	// A malformed checkpoint file is an error, not a silent reset.
	if err := os.WriteFile(filepath.Join(dir, CheckpointFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(DefaultConfig(), dir, src, discardLogger(), nil); err == nil {
		t.Fatal("malformed checkpoint accepted")
	}
}

// TestPartitionLogDir: one cleaner serves partitions of several log dirs,
// keeping each dir's progress in that dir's checkpoint file.
func TestPartitionLogDir(t *testing.T) {
	dir1, dir2 := t.TempDir(), t.TempDir()
	h := newHarness(t, dir2, compactCfg(), testCleanerCfg(), nil, nil)
	defer h.close()
	overwriteAndRoll(t, h, 5)
	c, err := New(testCleanerCfg(), dir1, slices.Values([]Partition{{Topic: "t", Partition: 0, Log: h.log, LogDir: dir2}}), discardLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	defer c.Close()
	if err := c.CleanNow(context.Background(), "t", 0); err != nil {
		t.Fatal(err)
	}
	ck2, err := readCheckpoint(vfs.Default(), filepath.Join(dir2, CheckpointFile))
	if err != nil || ck2[tp{"t", 0}] != 5 {
		t.Fatalf("dir2 checkpoint %v %v", ck2, err)
	}
	if _, err := os.Stat(filepath.Join(dir1, CheckpointFile)); !os.IsNotExist(err) {
		t.Fatalf("dir1 checkpoint written: %v", err)
	}
	c.Forget("t", 0)
	if ck2, _ = readCheckpoint(vfs.Default(), filepath.Join(dir2, CheckpointFile)); len(ck2) != 0 {
		t.Fatalf("forget left %v", ck2)
	}
}

// TestReaderSurvivesSwap: a fetch that holds chunks of the old segments
// keeps reading the old bytes after the cleaner swapped them out.
func TestReaderSurvivesSwap(t *testing.T) {
	h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
	defer h.close()
	overwriteAndRoll(t, h, 20)
	res, err := h.log.Read(0, 1<<20, true)
	if err != nil || len(res.Chunks) == 0 {
		t.Fatalf("read: %v", err)
	}
	defer res.Release()
	h.clean()
	for _, ch := range res.Chunks {
		buf := make([]byte, ch.Len)
		if _, err := ch.File.File().ReadAt(buf, ch.Pos); err != nil {
			t.Fatalf("held chunk unreadable after swap: %v", err)
		}
		n := 0
		for len(buf) > 0 {
			b, rest, err := record.Next(buf)
			if err != nil {
				break
			}
			if err := record.ValidateStored(b); err != nil {
				t.Fatalf("held chunk corrupt after swap: %v", err)
			}
			n++
			buf = rest
		}
		if n != 20 {
			t.Fatalf("held chunk has %d batches, want the 20 old ones", n)
		}
	}
	if recs, _ := h.readAll(); len(recs) != 1 {
		t.Fatalf("new readers see %d records", len(recs))
	}
}

// TestConcurrentProduceAndClean appends from one goroutine while the
// cleaner runs back-to-back rounds, then checks the latest-value view.
func TestConcurrentProduceAndClean(t *testing.T) {
	cfg := compactCfg()
	cfg.SegmentBytes = 16 << 10 // roll often so there is always something to clean
	h := newHarness(t, t.TempDir(), cfg, testCleanerCfg(), nil, nil)
	defer h.close()
	latest := map[string][]byte{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 3000; i++ {
			k := []byte(fmt.Sprint("k", i%37))
			v := []byte(fmt.Sprint(i))
			if i%11 == 0 {
				v = nil
			}
			if _, err := h.append(clientBatch(codecs[i%len(codecs)], noProducer, int64(i), []kv{{k, v}})); err != nil {
				t.Error(err)
				return
			}
			latest[string(k)] = v
		}
	}()
	rounds := 0
	for running := true; running; rounds++ {
		select {
		case <-done:
			running = false
		default:
		}
		if err := h.cl.CleanNow(context.Background(), "t", 0); err != nil {
			t.Fatal(err)
		}
	}
	recs, _ := h.readAll()
	checkLatestTB(t, recs, latest)
	t.Logf("%d rounds, %d records left of 3000", rounds, len(recs))
}

// TestCorruptBatchFailsRound: a batch whose CRC does not match fails the
// round (reported, retried later) and the log is left as it was.
func TestCorruptBatchFailsRound(t *testing.T) {
	h := newHarness(t, t.TempDir(), compactCfg(), testCleanerCfg(), nil, nil)
	defer h.close()
	for i := 0; i < 10; i++ {
		mustAppend(t, h, kv{[]byte("k"), []byte(fmt.Sprintf("value-%03d", i))})
	}
	if err := h.log.Roll(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(h.dir, storage.FileName(0, storage.LogSuffix))
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte("value-005"))
	if i < 0 {
		t.Fatal("value not found")
	}
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("X"), int64(i)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = h.cl.CleanNow(context.Background(), "t", 0)
	if err == nil || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("want a CRC error, got %v", err)
	}
	st := h.cl.Status("t")[0]
	if !st.Uncleanable || !strings.Contains(st.UncleanableReason, "CRC") {
		t.Fatalf("status %+v", st)
	}
	after, err := os.ReadFile(seg)
	if err != nil || len(after) != len(data) {
		t.Fatalf("segment changed: %v", err)
	}
}
