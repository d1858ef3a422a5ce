package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/bench"
)

// envInt reads a positive integer from the environment, def when unset.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkManyPartitions measures every row of issue 18 ("Ten thousand
// partitions on one broker") against the real binary, as an operator
// would: a broker with STRATA_MANYPARTS_TOPICS topics (10) of
// STRATA_MANYPARTS_PARTITIONS partitions (1000) plus the internal topics,
// then CreateTopics, Metadata (franz-go and kcat -L), acks=all produce and
// consume over one topic's partitions against a one-partition topic in the
// same run, end-to-end latency at 5,000 records/s, RSS and open files,
// clean shutdown (SIGTERM), start after it, and start after kill -9 in the
// middle of an acks=all produce. Runs of STRATA_MANYPARTS_SECONDS (10)
// seconds per load step; STRATA_MANYPARTS_ARGS adds broker flags. It
// prints one table; compare ratios within a run.
//
//	go test ./test/e2e/ -run '^$' -bench ManyPartitions -benchtime 1x -timeout 60m -v
func BenchmarkManyPartitions(b *testing.B) {
	if b.N > 1 {
		b.Fatal("run with -benchtime 1x")
	}
	topics := envInt("STRATA_MANYPARTS_TOPICS", 10)
	parts := envInt("STRATA_MANYPARTS_PARTITIONS", 1000)
	secs := envInt("STRATA_MANYPARTS_SECONDS", 10)
	load := time.Duration(secs) * time.Second
	defer func(d time.Duration) { startTimeout = d }(startTimeout)
	startTimeout = 30 * time.Minute
	dir := b.TempDir()
	mport := freePort(b)
	extra := []string{"--strata.metrics.listener", fmt.Sprintf("127.0.0.1:%d", mport)}
	// STRATA_MANYPARTS_ARGS: more broker flags (say
	// "--strata.log.journal.bytes 0" to compare without the journal).
	extra = append(extra, strings.Fields(os.Getenv("STRATA_MANYPARTS_ARGS"))...)
	ctx := ctxFor(b, 2*time.Hour)
	var rows []string
	row := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		rows = append(rows, line)
		b.Log(line)
	}
	p := startBroker(b, dir, extra...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { cl.Close() }()
	adm := kadm.NewClient(cl)

	// CreateTopics, one request per topic of `parts` partitions.
	var creates []time.Duration
	for i := range topics {
		start := time.Now()
		res, err := adm.CreateTopic(ctx, int32(parts), 1, nil, fmt.Sprintf("mp-%d", i))
		if err != nil || res.Err != nil {
			b.Fatalf("create mp-%d: %v %v", i, err, res.Err)
		}
		creates = append(creates, time.Since(start))
	}
	row("CreateTopics of %d partitions: first %s, median %s, max %s (%d topics)", parts,
		creates[0].Round(time.Millisecond), median(creates).Round(time.Millisecond), maxDur(creates).Round(time.Millisecond), topics)
	total := topics*parts + countInternal(b, ctx, adm)

	// Metadata for every partition.
	var metas []time.Duration
	for range 5 {
		req := kmsg.NewPtrMetadataRequest()
		start := time.Now()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			b.Fatalf("metadata: %v", err)
		}
		metas = append(metas, time.Since(start))
		n := 0
		for _, t := range resp.Topics {
			n += len(t.Partitions)
		}
		if n < topics*parts {
			b.Fatalf("metadata listed %d partitions, want at least %d", n, topics*parts)
		}
	}
	row("Metadata, all %d partitions (franz-go request, 5 runs): min %s, median %s", total,
		minDur(metas).Round(100*time.Microsecond), median(metas).Round(100*time.Microsecond))
	if kcat, err := exec.LookPath("kcat"); err == nil {
		var ks []time.Duration
		for range 3 {
			start := time.Now()
			out, err := exec.CommandContext(ctx, kcat, "-L", "-b", p.Kafka, "-m", "60").Output()
			if err != nil {
				b.Fatalf("kcat -L: %v", err)
			}
			ks = append(ks, time.Since(start))
			if !strings.Contains(string(out), "mp-0") {
				b.Fatalf("kcat -L output lacks mp-0")
			}
		}
		row("Metadata, all %d partitions (kcat -L, 3 runs): min %s, median %s", total,
			minDur(ks).Round(100*time.Microsecond), median(ks).Round(100*time.Microsecond))
	}

	// acks=all produce, 512 B records: one partition vs the `parts`
	// partitions of mp-0, alternating twice.
	cfg := func(topic string, partitions int32) bench.Config {
		return bench.Config{Brokers: []string{p.Kafka}, Topic: topic, Partitions: partitions, RecordSize: 512, Duration: load, Acks: "all"}
	}
	var one, many []bench.Result
	for range 2 {
		r1, err := bench.Produce(ctx, cfg("one", 1))
		if err != nil {
			b.Fatalf("produce one: %v", err)
		}
		one = append(one, r1)
		rm, err := bench.Produce(ctx, cfg("mp-0", int32(parts)))
		if err != nil {
			b.Fatalf("produce mp-0: %v", err)
		}
		many = append(many, rm)
	}
	for i := range one {
		row("produce acks=all 512 B, pair %d: 1 partition %.1f MB/s (p99 %.0f ms), %d partitions %.1f MB/s (p99 %.0f ms) = %.2fx",
			i+1, one[i].MBPerSec, one[i].Latency.P99, parts, many[i].MBPerSec, many[i].Latency.P99, many[i].MBPerSec/one[i].MBPerSec)
	}

	// Consume from the start, the same number of records from each.
	n := min(one[0].Records+one[1].Records, many[0].Records+many[1].Records)
	for i := range 2 {
		c1 := cfg("one", 1)
		c1.Count, c1.Duration = n, 0
		r1, err := bench.Consume(ctx, c1)
		if err != nil {
			b.Fatalf("consume one: %v", err)
		}
		cm := cfg("mp-0", int32(parts))
		cm.Count, cm.Duration = n, 0
		rm, err := bench.Consume(ctx, cm)
		if err != nil {
			b.Fatalf("consume mp-0: %v", err)
		}
		row("consume %d records from the start, pair %d: 1 partition %.1f MB/s, %d partitions %.1f MB/s = %.2fx",
			n, i+1, r1.MBPerSec, parts, rm.MBPerSec, rm.MBPerSec/r1.MBPerSec)
	}

	// End-to-end latency at 5,000 records/s.
	e1c := cfg("e2e-one", 1)
	e1c.Rate = 5000
	e1, err := bench.E2E(ctx, e1c)
	if err != nil {
		b.Fatalf("e2e one: %v", err)
	}
	emc := cfg(fmt.Sprintf("mp-%d", min(1, topics-1)), int32(parts))
	emc.Rate = 5000
	em, err := bench.E2E(ctx, emc)
	if err != nil {
		b.Fatalf("e2e many: %v", err)
	}
	row("e2e at 5,000 records/s: 1 partition p50 %.2f ms p99 %.2f ms; %d partitions p50 %.2f ms p99 %.2f ms (%.1fx, %.1fx)",
		e1.Latency.P50, e1.Latency.P99, parts, em.Latency.P50, em.Latency.P99, em.Latency.P50/e1.Latency.P50, em.Latency.P99/e1.Latency.P99)
	if e1.AckLatency != nil && em.AckLatency != nil {
		// The produce ack (acks=all: durable) within it; the rest is the
		// consumer's fetch.
		row("e2e produce ack: 1 partition p50 %.2f ms p99 %.2f ms; %d partitions p50 %.2f ms p99 %.2f ms",
			e1.AckLatency.P50, e1.AckLatency.P99, parts, em.AckLatency.P50, em.AckLatency.P99)
	}

	rss, fds := procStats(b, p)
	row("memory after the load steps: RSS %d MB, %d open files", rss>>20, fds)

	// Clean shutdown.
	cl.Close()
	start := time.Now()
	code := termWait(b, p, 10*time.Minute)
	_, markErr := os.Stat(filepath.Join(dir, ".kafka_cleanshutdown"))
	row("clean shutdown (SIGTERM, default --shutdown-timeout 30s): %s, exit code %d, clean-shutdown marker written: %v",
		time.Since(start).Round(10*time.Millisecond), code, markErr == nil)

	// Start after the clean shutdown.
	start = time.Now()
	p = startBroker(b, dir, extra...)
	waitReady(b, ctx, mport)
	row("start after clean shutdown to /readyz: %s (logs loaded in %s)", time.Since(start).Round(10*time.Millisecond), p.logsLoaded())
	rss, fds = procStats(b, p)
	row("memory after the clean start: RSS %d MB, %d open files", rss>>20, fds)

	// kill -9 in the middle of an acks=all produce over mp-2.
	kt := fmt.Sprintf("mp-%d", min(2, topics-1))
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { // owner: this benchmark; ends when pctx is cancelled
		kc := cfg(kt, int32(parts))
		kc.Duration = time.Hour
		_, err := bench.Produce(pctx, kc)
		done <- err
	}()
	time.Sleep(load / 2)
	p.Kill()
	cancel()
	<-done
	start = time.Now()
	p = startBroker(b, dir, extra...)
	waitReady(b, ctx, mport)
	row("start after kill -9 (during acks=all produce to %s) to /readyz: %s (logs loaded in %s)", kt,
		time.Since(start).Round(10*time.Millisecond), p.logsLoaded())
	rss, fds = procStats(b, p)
	row("memory after the recovery: RSS %d MB, %d open files", rss>>20, fds)
	start = time.Now()
	code = termWait(b, p, 10*time.Minute)
	row("clean shutdown after the recovery: %s, exit code %d", time.Since(start).Round(10*time.Millisecond), code)
	b.Logf("\n%d partitions in all (%d topics of %d + internal topics), %d s per load step:\n  %s", total, topics, parts, secs,
		strings.Join(rows, "\n  "))
}

// countInternal returns the partitions of the internal topics.
func countInternal(b *testing.B, ctx context.Context, adm *kadm.Client) int {
	tds, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, td := range tds {
		if td.IsInternal {
			n += len(td.Partitions)
		}
	}
	return n
}

// termWait sends SIGTERM and waits up to limit for the exit; it returns
// the exit code (-1 when killed by a signal).
func termWait(b *testing.B, p *proc, limit time.Duration) int {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(limit):
		b.Fatalf("no exit within %s of SIGTERM", limit)
	}
	if p.cmd.ProcessState == nil {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// waitReady polls /readyz until it answers 200.
func waitReady(b *testing.B, ctx context.Context, port int) {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	for {
		if code, _, err := httpGet(ctx, url); err == nil && code == 200 {
			return
		}
		if ctx.Err() != nil {
			b.Fatal("not ready before the deadline")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procStats returns the broker's resident memory (bytes) and open files.
func procStats(b *testing.B, p *proc) (int64, int) {
	pid := p.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	var rss int64
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss = kb << 10
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		b.Fatal(err)
	}
	return rss, len(fds)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func minDur(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

func maxDur(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
