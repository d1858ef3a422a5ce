package cleaner

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// Config is the broker-level cleaner configuration (Kafka's names).
type Config struct {
	Enable              bool          // log.cleaner.enable (true)
	Threads             int           // log.cleaner.threads (1)
	DedupeBufferSize    int64         // log.cleaner.dedupe.buffer.size (134217728), shared by all threads
	IOMaxBytesPerSecond float64       // log.cleaner.io.max.bytes.per.second (Kafka's default Double.MAX, 0 or +Inf = unlimited)
	Backoff             time.Duration // log.cleaner.backoff.ms (15s): idle sleep (at least minIdle) and base of the retry backoff (at least minRetry)
	// FS holds the cleaner-offset-checkpoint files (nil: the OS); the
	// broker's, so that power-loss tests cover the cleaner's progress.
	FS vfs.FS
	// InternalPartitionMetrics exports the per-partition gauges of
	// internal topics too (strata.metrics.internal.partitions).
	InternalPartitionMetrics bool
	// Clock is the time source of compaction horizons, backoffs, the
	// throttle's accounting and the status (nil: clock.Real()).
	Clock clock.Clock
}

// minIdle and minRetry bound log.cleaner.backoff.ms=0 so that an idle or
// failing cleaner does not spin.
const (
	minIdle  = 10 * time.Millisecond
	minRetry = time.Second
)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{Enable: true, Threads: 1, DedupeBufferSize: 128 << 20, Backoff: 15 * time.Second}
}

// workerNice is how much lower than the broker's a cleaner thread's
// scheduling priority is (nice +10): compaction is background work, and on
// a busy machine the kernel should run produce and fetch first. Measured
// with -bench ProduceWhileCleaning (docs/benchmarks.md "Cleaner").
const workerNice = 10

// maxRetryBackoff caps the exponential backoff of a failing partition.
const maxRetryBackoff = 10 * time.Minute

// Partition is one partition the cleaner may compact.
type Partition struct {
	Topic     string
	Partition int32
	Log       *storage.Log
	// LogDir is the log dir holding the partition, whose
	// cleaner-offset-checkpoint records its progress; "" means the logDir
	// given to New. One Cleaner can so serve every log dir of a broker
	// with one dedupe buffer, as in Kafka.
	LogDir string
	// Internal marks an internal topic (__consumer_offsets,
	// __transaction_state), whose per-partition gauges are exported only
	// with Config.InternalPartitionMetrics.
	Internal bool
}

// Source yields every partition of the broker; the cleaner compacts those
// whose Log.Config().Compact is set. It is an iterator rather than a
// slice because the cleaner's loop and the console's status walk it every
// few seconds: a slice of a 10,100-partition broker's partitions was
// 2.8 MB of garbage per walk, most of what an idle broker allocated
// (issue 18).
type Source = iter.Seq[Partition]

// ErrDisabled is returned by CleanNow when log.cleaner.enable is false.
var ErrDisabled = errors.New("cleaner: log.cleaner.enable is false")

// ErrNotFound is returned by CleanNow when no compacted partition matches.
var ErrNotFound = errors.New("cleaner: no such compacted partition")

// Cleaner runs log compaction with Config.Threads workers.
type Cleaner struct {
	cfg      Config
	logDir   string
	ckpts    *checkpoints
	src      Source
	logger   *slog.Logger
	now      func() time.Time
	throttle *throttler
	met      *metrics
	hooks    hooks

	mu      sync.Mutex // guards the fields below
	parts   map[tp]*partState
	lastRun time.Time
	started bool
	closed  bool

	jobs   chan *job
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// hooks let tests interrupt a round at chosen points (crash tests).
type hooks struct {
	beforeSwap func(base int64)
}

// partState is what the cleaner knows about one partition.
type partState struct {
	busy sync.Mutex // held while a round runs

	// Guarded by Cleaner.mu.
	inProgress  bool
	last        *roundResult
	lastErr     string
	lastErrTime time.Time
	failures    int
	nextAttempt time.Time
	totals      roundStats
	rounds      int64
}

type job struct {
	p    Partition
	done chan error
}

// New creates a cleaner for the log dir logDir (where it keeps
// cleaner-offset-checkpoint). reg may be nil. It starts nothing.
func New(cfg Config, logDir string, src Source, logger *slog.Logger, reg prometheus.Registerer) (*Cleaner, error) {
	if cfg.Threads < 0 {
		return nil, fmt.Errorf("cleaner: log.cleaner.threads %d < 0", cfg.Threads)
	}
	if logger == nil {
		logger = slog.Default()
	}
	if cfg.Enable && cfg.Threads == 0 {
		// Like Kafka, zero threads means nothing is cleaned.
		logger.Warn("log.cleaner.threads=0: compaction is off")
		cfg.Enable = false
	}
	if cfg.Enable {
		if per := cfg.DedupeBufferSize / int64(cfg.Threads); per/EntrySize < 2 {
			return nil, fmt.Errorf("cleaner: log.cleaner.dedupe.buffer.size %d too small for %d threads: increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads", cfg.DedupeBufferSize, cfg.Threads)
		}
	}
	if cfg.FS == nil {
		cfg.FS = vfs.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	ck, err := newCheckpoints(cfg.FS, logDir)
	if err != nil {
		return nil, fmt.Errorf("cleaner: %w", err)
	}
	c := &Cleaner{
		cfg:    cfg,
		logDir: logDir,
		ckpts:  ck,
		src:    src,
		logger: logger.With("component", "cleaner"),
		now:    cfg.Clock.Now,
		parts:  map[tp]*partState{},
		jobs:   make(chan *job),
	}
	c.throttle = newThrottler(cfg.IOMaxBytesPerSecond, c.now)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.met, err = newMetrics(c, reg)
	if err != nil {
		return nil, fmt.Errorf("cleaner: %w", err)
	}
	return c, nil
}

// Start launches the worker goroutines (none when disabled).
func (c *Cleaner) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed || !c.cfg.Enable {
		return
	}
	c.started = true
	per := c.cfg.DedupeBufferSize / int64(c.cfg.Threads)
	for i := 0; i < c.cfg.Threads; i++ {
		w := &worker{id: i, mapMem: per}
		c.wg.Add(1)
		go c.run(w)
	}
}

// Close stops the workers, aborting rounds in progress (their output is
// discarded; the logs are unchanged by an aborted round), and waits.
func (c *Cleaner) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.met.unregister()
	return nil
}

// Forget drops a deleted partition's state and checkpoint entry.
func (c *Cleaner) Forget(topic string, partition int32) {
	k := tp{topic, partition}
	c.mu.Lock()
	delete(c.parts, k)
	c.mu.Unlock()
	c.met.forget(k)
	if err := c.ckpts.forget(k); err != nil {
		c.logger.Error("write cleaner checkpoint", "err", err)
	}
}

// run is one worker's loop: clean the filthiest eligible log, or wait for
// a CleanNow job or the backoff.
func (c *Cleaner) run(w *worker) {
	defer c.wg.Done()
	defer w.free()
	if err := lowerThreadPriority(workerNice); err != nil {
		c.logger.Warn("cleaner runs at normal priority", "err", err)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case j := <-c.jobs:
			j.done <- c.round(w, j.p, true)
			continue
		default:
		}
		if c.cleanFilthiest(w) {
			continue
		}
		timer.Reset(max(c.cfg.Backoff, minIdle))
		select {
		case <-c.ctx.Done():
			return
		case j := <-c.jobs:
			j.done <- c.round(w, j.p, true)
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// compacted returns the partitions with cleanup.policy containing compact.
func (c *Cleaner) compacted(topic string) []Partition {
	var out []Partition
	for p := range c.src {
		if p.Log == nil || (topic != "" && p.Topic != topic) || !p.Log.Config().Compact {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func (c *Cleaner) state(k tp) *partState {
	st := c.parts[k]
	if st == nil {
		st = &partState{}
		c.parts[k] = st
	}
	return st
}

// checkpointOf returns the partition's first dirty offset, -1 if none.
func (c *Cleaner) checkpointOf(p Partition) (int64, error) {
	return c.ckpts.get(p.LogDir, tp{p.Topic, p.Partition})
}

// cleanFilthiest picks the eligible log with the highest dirty ratio that
// is not being cleaned and not backing off after a failure, and cleans
// it. It reports whether a round ran.
func (c *Cleaner) cleanFilthiest(w *worker) bool {
	now := c.now()
	nowMs := now.UnixMilli()
	var best *Partition
	var bestRatio float64
	maxDirty := 0.0
	maxDelay := int64(0)
	for _, p := range c.compacted("") {
		l := p.Log
		// Strata rolls idle segments so that low-volume compacted topics
		// are cleaned (Kafka rolls only on append).
		if _, err := l.MaybeRoll(now); err != nil {
			c.logger.Warn("roll idle segment", "topic", p.Topic, "partition", p.Partition, "err", err)
		}
		k := tp{p.Topic, p.Partition}
		ck, err := c.checkpointOf(p)
		if err != nil {
			c.logger.Error("read cleaner checkpoint", "topic", p.Topic, "partition", p.Partition, "err", err)
		}
		cl := computeCleanable(l.Segments(), l.LogStartOffset(), l.LogEndOffset(), l.LastStableOffset(), ck, l.Config(), nowMs)
		if !p.Internal || c.cfg.InternalPartitionMetrics {
			c.met.observePartition(k, cl, nowMs)
		}
		c.mu.Lock()
		st := c.state(k)
		skip := st.inProgress || now.Before(st.nextAttempt)
		c.mu.Unlock()
		if cl.Ratio > maxDirty {
			maxDirty = cl.Ratio
		}
		if cl.MaxLagDue {
			maxDelay = max(maxDelay, nowMs-l.Config().MaxCompactionLagMs-cl.OldestCleanableTs)
		}
		if skip || !cl.eligible(l.Config().MinCleanableDirtyRatio) {
			continue
		}
		if best == nil || cl.Ratio > bestRatio {
			p := p
			best, bestRatio = &p, cl.Ratio
		}
	}
	c.mu.Lock()
	c.lastRun = now
	c.mu.Unlock()
	c.met.maxDirty.Set(100 * maxDirty)
	c.met.maxDelay.Set(float64(maxDelay) / 1000)
	if best == nil {
		return false
	}
	_ = c.round(w, *best, false)
	return true
}

// round runs one cleaning round on p, recovering a panic, recording the
// result and scheduling a retry with exponential backoff after a failure.
func (c *Cleaner) round(w *worker, p Partition, force bool) (err error) {
	k := tp{p.Topic, p.Partition}
	c.mu.Lock()
	st := c.state(k)
	c.mu.Unlock()
	st.busy.Lock()
	defer st.busy.Unlock()
	c.mu.Lock()
	if c.parts[k] != st { // forgotten meanwhile
		c.mu.Unlock()
		return ErrNotFound
	}
	st.inProgress = true
	c.mu.Unlock()

	var res roundResult
	func() {
		defer func() {
			if r := recover(); r != nil {
				c.met.panics.Inc()
				err = fmt.Errorf("cleaner panic: %v", r)
				c.logger.Error("cleaner goroutine panicked; recovered", "topic", p.Topic, "partition", p.Partition, "panic", r, "stack", string(debug.Stack()))
			}
		}()
		var ck int64
		if ck, err = c.checkpointOf(p); err != nil {
			return
		}
		res, err = c.cleanLog(c.ctx, w, p.Log, ck, force)
		w.release()
	}()
	if err == nil && !res.NothingToDo {
		c.mu.Lock()
		live := c.parts[k] == st
		c.mu.Unlock()
		if live {
			err = c.ckpts.set(p.LogDir, k, res.EndOffset)
		}
	}

	now := c.now()
	c.mu.Lock()
	st.inProgress = false
	if err != nil && c.ctx.Err() != nil {
		c.mu.Unlock()
		return fmt.Errorf("cleaner closed: %w", err)
	}
	if errors.Is(err, errSegmentsChanged) {
		c.mu.Unlock()
		c.met.aborted.Inc()
		c.logger.Info("cleaning aborted: segments changed meanwhile; will start over", "topic", p.Topic, "partition", p.Partition, "err", err)
		return fmt.Errorf("clean %s: %w", k, err)
	}
	if err != nil {
		st.failures++
		st.lastErr = err.Error()
		st.lastErrTime = now
		d := max(c.cfg.Backoff, minRetry) << min(st.failures-1, 16)
		if d > maxRetryBackoff || d <= 0 {
			d = maxRetryBackoff
		}
		st.nextAttempt = now.Add(d)
		failures := st.failures
		c.mu.Unlock()
		c.met.failures.Inc()
		c.logger.Error("cleaning failed; will retry", "topic", p.Topic, "partition", p.Partition,
			"failures", failures, "retry_in", d, "err", err)
		return fmt.Errorf("clean %s: %w", k, err)
	}
	st.failures = 0
	st.lastErr = ""
	st.nextAttempt = time.Time{}
	if !res.NothingToDo {
		res.Duration = now.Sub(res.Start)
		st.last = &res
		st.totals.add(res.Stats)
		st.rounds++
	}
	c.mu.Unlock()
	if !res.NothingToDo {
		c.met.observeRound(w.id, res)
		c.logger.Info("cleaned log", "topic", p.Topic, "partition", p.Partition,
			"first_dirty", res.FirstDirty, "end_offset", res.EndOffset, "segments", res.Segments,
			"bytes_read", res.Stats.BytesRead, "bytes_written", res.Stats.BytesWritten,
			"records_removed", res.Stats.RecordsRemoved, "tombstones_removed", res.Stats.TombstonesRemoved,
			"aborted_removed", res.Stats.AbortedRemoved, "markers_removed", res.Stats.MarkersRemoved,
			"map_keys", res.MapKeys, "map_full", res.MapFull, "duration", res.Duration)
	}
	return nil
}

// CleanNow runs one round on the partition (partition -1: every partition
// of topic) right away, regardless of the dirty ratio, and waits for it.
func (c *Cleaner) CleanNow(ctx context.Context, topic string, partition int32) error {
	c.mu.Lock()
	running := c.started && !c.closed
	c.mu.Unlock()
	if !c.cfg.Enable {
		return ErrDisabled
	}
	if !running {
		return errors.New("cleaner: not running")
	}
	var todo []Partition
	for _, p := range c.compacted(topic) {
		if partition < 0 || p.Partition == partition {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		return fmt.Errorf("%w: topic %q partition %d", ErrNotFound, topic, partition)
	}
	var errs []error
	for _, p := range todo {
		j := &job{p: p, done: make(chan error, 1)}
		select {
		case c.jobs <- j:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return errors.New("cleaner: closed")
		}
		select {
		case err := <-j.done:
			if err != nil {
				errs = append(errs, err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}
