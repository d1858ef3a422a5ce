// Package bench is the load generator behind `strata bench`: produce,
// consume and end-to-end runs against any Kafka-compatible cluster, with
// throughput and latency percentiles.
package bench

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// Config describes one benchmark run.
type Config struct {
	Brokers    []string
	Topic      string
	Partitions int32 // partitions of the topic when it is created (it is created if missing)
	// ExactPartitions refuses a topic that already exists with another
	// partition count than Partitions (the CLI sets it when --partitions
	// is given, so the flag is never silently ignored).
	ExactPartitions bool
	RecordSize      int           // value bytes per record
	Count           int64         // records to send/read; 0 = run for Duration
	Duration        time.Duration // used when Count is 0
	Rate            float64       // target records per second; 0 = as fast as possible
	Keys            int64         // distinct keys (uniformly random); 0 = null keys
	Acks            string        // all, 1 or 0
	Compression     string        // none, gzip, snappy, lz4, zstd
	Linger          time.Duration // producer linger
	// TLS, when set, makes every client connect with TLS (an SSL listener).
	TLS *tls.Config
	// SASL, when set, makes every client authenticate with it (a
	// SASL_PLAINTEXT or SASL_SSL listener).
	SASL sasl.Mechanism
	// Progress receives one line per second while running (nil = silent).
	Progress io.Writer
}

// Result is a run's summary. Latency is the produce ack latency for
// produce runs and the produce-to-consume latency for e2e runs, both
// measured from the moment the record is handed to the client, so they
// include time queued in the client (up to 100000 buffered records): at an
// unlimited rate that queueing dominates; use Rate to measure the broker.
type Result struct {
	Mode          string   `json:"mode"`
	Topic         string   `json:"topic"`
	Records       int64    `json:"records"`
	Bytes         int64    `json:"bytes"`
	Errors        int64    `json:"errors"`
	ElapsedSec    float64  `json:"elapsed_sec"`
	RecordsPerSec float64  `json:"records_per_sec"`
	MBPerSec      float64  `json:"mb_per_sec"`
	Latency       *Latency `json:"latency_ms,omitempty"`
	// AckLatency is an e2e run's produce ack latency (from the same send
	// times): with acks=all the part of Latency until the records were
	// durable; the rest is the consumer's fetch.
	AckLatency *Latency `json:"ack_latency_ms,omitempty"`
}

// Latency holds percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func latencyOf(h *Histogram) *Latency {
	if h.Count() == 0 {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return &Latency{P50: ms(h.Quantile(0.5)), P99: ms(h.Quantile(0.99)), P999: ms(h.Quantile(0.999)), Max: ms(h.Max()), Mean: ms(h.Mean())}
}

// String is the human-readable summary.
func (r Result) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s: %d records, %.1f MB in %.2fs: %.0f records/s, %.2f MB/s",
		r.Mode, r.Topic, r.Records, float64(r.Bytes)/1e6, r.ElapsedSec, r.RecordsPerSec, r.MBPerSec)
	if r.Errors > 0 {
		fmt.Fprintf(&sb, ", %d errors", r.Errors)
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(&sb, "\nlatency ms: p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  mean %.2f", l.P50, l.P99, l.P999, l.Max, l.Mean)
	}
	if l := r.AckLatency; l != nil {
		fmt.Fprintf(&sb, "\nof which produce ack ms: p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f  mean %.2f", l.P50, l.P99, l.P999, l.Max, l.Mean)
	}
	return sb.String()
}

// validate checks the config and fills defaults.
func (c *Config) validate(minSize int) error {
	if len(c.Brokers) == 0 {
		return errors.New("no brokers")
	}
	if c.Topic == "" {
		return errors.New("no topic")
	}
	if c.Count < 0 || (c.Count == 0 && c.Duration <= 0) {
		return errors.New("need a positive --count or --duration")
	}
	if c.RecordSize < minSize {
		return fmt.Errorf("record size must be at least %d bytes", minSize)
	}
	if c.Partitions <= 0 {
		c.Partitions = 1
	}
	if c.Rate < 0 || c.Keys < 0 {
		return errors.New("rate and keys must not be negative")
	}
	return nil
}

// producerOpts maps the config to kgo options.
func (c *Config) producerOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.DefaultProduceTopic(c.Topic), kgo.ProducerLinger(c.Linger), kgo.MaxBufferedRecords(100000)}
	switch c.Acks {
	case "", "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return nil, fmt.Errorf("invalid acks %q: use all, 1 or 0", c.Acks)
	}
	switch c.Compression {
	case "", "none":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		return nil, fmt.Errorf("invalid compression %q: use none, gzip, snappy, lz4 or zstd", c.Compression)
	}
	return opts, nil
}

// newClient connects to c.Brokers (with TLS when c.TLS is set, SASL when
// c.SASL is) and checks
// that a broker answers.
func newClient(ctx context.Context, c *Config, opts ...kgo.Opt) (*kgo.Client, error) {
	brokers := c.Brokers
	base := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("strata-bench")}
	if c.TLS != nil {
		base = append(base, kgo.DialTLSConfig(c.TLS))
	}
	if c.SASL != nil {
		base = append(base, kgo.SASL(c.SASL))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("cannot reach broker at %s: %w", strings.Join(brokers, ","), err)
	}
	return cl, nil
}

// ensureTopic creates the topic if it does not exist and returns its
// partition count.
func ensureTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int32, exact bool) (int32, error) {
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %q: %w", topic, err)
	}
	if err == nil && resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %q: %w", topic, resp.Err)
	}
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describe topic %q: %w", topic, err)
	}
	td := tds[topic]
	if td.Err != nil {
		return 0, fmt.Errorf("describe topic %q: %w", topic, td.Err)
	}
	n := int32(len(td.Partitions))
	if exact && n != partitions {
		return 0, fmt.Errorf("topic %q already exists with %d partitions, not --partitions %d (it applies only when bench creates the topic): bench another --topic, or grow this one with strata topic add-partitions %s --to %d",
			topic, n, partitions, topic, partitions)
	}
	return n, nil
}

// counters are shared by the load loop, callbacks and the progress line.
type counters struct {
	mu       sync.Mutex
	records  int64
	bytes    int64
	errors   int64
	firstErr error
	hist     Histogram
	window   Histogram // latencies since the last progress line
}

func (c *counters) add(n int, lat time.Duration, withLatency bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errors++
		if c.firstErr == nil {
			c.firstErr = err
		}
		return
	}
	c.records++
	c.bytes += int64(n)
	if withLatency {
		c.hist.Record(lat)
		c.window.Record(lat)
	}
}

// progress prints one line per second until ctx ends.
func (c *counters) progress(ctx context.Context, w io.Writer, mode string, start time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	if w == nil {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastRecs, lastBytes int64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.mu.Lock()
			recs, b := c.records, c.bytes
			var p99 time.Duration
			if c.window.Count() > 0 {
				p99 = c.window.Quantile(0.99)
			}
			c.window = Histogram{}
			errs := c.errors
			c.mu.Unlock()
			line := fmt.Sprintf("[%5.0fs] %s: %d records  %.0f rec/s  %.2f MB/s", now.Sub(start).Seconds(), mode, recs,
				float64(recs-lastRecs), float64(b-lastBytes)/1e6)
			if p99 > 0 {
				line += fmt.Sprintf("  p99 %.2fms", float64(p99)/1e6)
			}
			if errs > 0 {
				line += fmt.Sprintf("  %d errors", errs)
			}
			fmt.Fprintln(w, line)
			lastRecs, lastBytes = recs, b
		}
	}
}

func (c *counters) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.records
}

func (c *counters) errorCount() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.errors
}

func (c *counters) result(mode, topic string, elapsed time.Duration) Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	secs := elapsed.Seconds()
	if secs <= 0 {
		secs = 1e-9
	}
	return Result{Mode: mode, Topic: topic, Records: c.records, Bytes: c.bytes, Errors: c.errors, ElapsedSec: secs,
		RecordsPerSec: float64(c.records) / secs, MBPerSec: float64(c.bytes) / 1e6 / secs, Latency: latencyOf(&c.hist)}
}

// pacer spaces sends to a target rate.
type pacer struct {
	start time.Time
	rate  float64
}

// wait sleeps until record i is due; false when ctx ended.
func (p pacer) wait(ctx context.Context, i int64) bool {
	if p.rate <= 0 {
		return ctx.Err() == nil
	}
	due := p.start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return ctx.Err() == nil
}

// produceLoop sends records until Count or Duration, calling onAck per
// acknowledged record. The value's first 8 bytes carry the send time in
// unix nanoseconds (for e2e latency).
func produceLoop(ctx context.Context, c *Config, cl *kgo.Client, ctr *counters) (int64, error) {
	runCtx := ctx
	if c.Count == 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, c.Duration)
		defer cancel()
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	payload := make([]byte, c.RecordSize)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	p := pacer{start: time.Now(), rate: c.Rate}
	var sent int64
	for c.Count == 0 || sent < c.Count {
		if !p.wait(runCtx, sent) {
			break
		}
		val := make([]byte, c.RecordSize)
		copy(val, payload)
		now := time.Now()
		if len(val) >= 8 {
			binary.BigEndian.PutUint64(val, uint64(now.UnixNano()))
		}
		rec := &kgo.Record{Value: val}
		if c.Keys > 0 {
			rec.Key = []byte("key-" + strconv.FormatInt(rng.Int64N(c.Keys), 10))
		}
		n := len(val) + len(rec.Key)
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			ctr.add(n, time.Since(now), true, err)
		})
		sent++
	}
	fctx := ctx
	if ctx.Err() != nil { // interrupted: still wait briefly for what was sent
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
	}
	if err := cl.Flush(fctx); err != nil && ctx.Err() == nil {
		return sent, fmt.Errorf("flush: %w", err)
	}
	return sent, nil
}

// Produce runs a produce benchmark; latency is the ack latency.
func Produce(ctx context.Context, c Config) (Result, error) {
	if err := c.validate(0); err != nil {
		return Result{}, err
	}
	opts, err := c.producerOpts()
	if err != nil {
		return Result{}, err
	}
	cl, err := newClient(ctx, &c, opts...)
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	if _, err := ensureTopic(ctx, cl, c.Topic, c.Partitions, c.ExactPartitions); err != nil {
		return Result{}, err
	}
	ctr := &counters{}
	start := time.Now()
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go ctr.progress(pctx, c.Progress, "produce", start, &wg)
	_, err = produceLoop(ctx, &c, cl, ctr)
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	res := ctr.result("produce", c.Topic, elapsed)
	if err == nil && res.Errors > 0 && res.Records == 0 {
		err = fmt.Errorf("every record failed: %w", ctr.firstErr)
	}
	return res, err
}

// Consume reads the topic from the beginning until Count records, the end
// offsets as of the start, or Duration, whichever comes first.
func Consume(ctx context.Context, c Config) (Result, error) {
	if err := c.validate(0); err != nil {
		return Result{}, err
	}
	cl, err := newClient(ctx, &c, kgo.ConsumeTopics(c.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(64<<20))
	if err != nil {
		return Result{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, c.Topic)
	if err != nil {
		return Result{}, fmt.Errorf("list end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, c.Topic)
	if err != nil {
		return Result{}, fmt.Errorf("list start offsets: %w", err)
	}
	remaining := map[int32]int64{}
	var topicErr error
	ends.Each(func(lo kadm.ListedOffset) {
		if lo.Err != nil {
			topicErr = lo.Err
			return
		}
		if s, ok := starts.Lookup(lo.Topic, lo.Partition); ok && s.Offset < lo.Offset {
			remaining[lo.Partition] = lo.Offset
		}
	})
	if errors.Is(topicErr, kerr.UnknownTopicOrPartition) {
		return Result{}, fmt.Errorf("unknown topic %q", c.Topic)
	}
	if topicErr != nil {
		return Result{}, fmt.Errorf("topic %q: %w", c.Topic, topicErr)
	}
	runCtx := ctx
	if c.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, c.Duration)
		defer cancel()
	}
	ctr := &counters{}
	start := time.Now()
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go ctr.progress(pctx, c.Progress, "consume", start, &wg)
	defer func() { stop(); wg.Wait() }()
	for len(remaining) > 0 && (c.Count == 0 || ctr.count() < c.Count) {
		fs := cl.PollFetches(runCtx)
		if runCtx.Err() != nil {
			break
		}
		if err := fs.Err0(); err != nil {
			return Result{}, fmt.Errorf("fetch: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			ctr.add(len(r.Value)+len(r.Key), 0, false, nil)
			if end, ok := remaining[r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
	}
	elapsed := time.Since(start)
	return ctr.result("consume", c.Topic, elapsed), nil
}

// E2E produces and consumes at once; latency is from the producer's send
// time (in the record) to the consumer receiving it.
func E2E(ctx context.Context, c Config) (Result, error) {
	if err := c.validate(8); err != nil {
		return Result{}, err
	}
	opts, err := c.producerOpts()
	if err != nil {
		return Result{}, err
	}
	pcl, err := newClient(ctx, &c, opts...)
	if err != nil {
		return Result{}, err
	}
	defer pcl.Close()
	parts, err := ensureTopic(ctx, pcl, c.Topic, c.Partitions, c.ExactPartitions)
	if err != nil {
		return Result{}, err
	}
	adm := kadm.NewClient(pcl)
	ends, err := adm.ListEndOffsets(ctx, c.Topic)
	if err != nil {
		return Result{}, fmt.Errorf("list end offsets: %w", err)
	}
	from := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		off := int64(0)
		if lo, ok := ends.Lookup(c.Topic, p); ok && lo.Err == nil {
			off = lo.Offset
		}
		from[p] = kgo.NewOffset().At(off)
	}
	ccl, err := newClient(ctx, &c, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: from}),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return Result{}, err
	}
	defer ccl.Close()

	recv := &counters{}
	sendCtr := &counters{}
	start := time.Now()
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go recv.progress(pctx, c.Progress, "e2e", start, &wg)

	type produced struct {
		n   int64
		err error
	}
	sentCh := make(chan produced, 1)
	wg.Add(1)
	go func() { // owner: E2E; ends when produceLoop returns
		defer wg.Done()
		n, err := produceLoop(ctx, &c, pcl, sendCtr)
		sentCh <- produced{n, err}
	}()
	var (
		sent    = int64(-1)
		prodErr error
		grace   <-chan time.Time
	)
	for sent < 0 || recv.count() < sent-sendCtr.errorCount() {
		select {
		case p := <-sentCh:
			sent, prodErr = p.n, p.err
			t := time.NewTimer(30 * time.Second) // stop waiting for stragglers
			defer t.Stop()
			grace = t.C
			continue
		case <-grace:
			sent = 0 // give up on missing records
			continue
		default:
		}
		fctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := ccl.PollFetches(fctx)
		cancel()
		if ctx.Err() != nil {
			break
		}
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			stop()
			wg.Wait()
			return Result{}, fmt.Errorf("fetch: %w", err)
		}
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) < 8 {
				return
			}
			sentAt := time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))
			recv.add(len(r.Value)+len(r.Key), now.Sub(sentAt), true, nil)
		})
	}
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	res := recv.result("e2e", c.Topic, elapsed)
	sendCtr.mu.Lock()
	res.Errors = sendCtr.errors
	res.AckLatency = latencyOf(&sendCtr.hist)
	if prodErr == nil && sendCtr.firstErr != nil && res.Records == 0 {
		prodErr = fmt.Errorf("every record failed: %w", sendCtr.firstErr)
	}
	sendCtr.mu.Unlock()
	return res, prodErr
}
