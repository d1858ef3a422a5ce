package cleaner

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the cleaner's Prometheus collectors: Kafka's LogCleaner and
// LogCleanerManager metric names with a strata_cleaner_ prefix, plus
// counters and per-partition gauges.
type metrics struct {
	reg        prometheus.Registerer
	collectors []prometheus.Collector

	maxDirty     prometheus.Gauge
	recopy       prometheus.Gauge
	recopyOld    prometheus.Gauge // the name before 2026-12: strata_cleaner_cleaner_recopy_percent
	maxCleanTime prometheus.Gauge
	maxBufUtil   prometheus.Gauge
	maxDelay     prometheus.Gauge
	aborted      prometheus.Counter
	panics       prometheus.Counter
	failures     prometheus.Counter
	rounds       prometheus.Counter
	bytesRead    prometheus.Counter
	bytesWritten prometheus.Counter
	recsRemoved  prometheus.Counter
	tombsRemoved prometheus.Counter
	// abortedRemoved and markersRemoved count what transactions left.
	abortedRemoved prometheus.Counter
	markersRemoved prometheus.Counter

	partDirtyRatio *prometheus.GaugeVec
	partDirtyBytes *prometheus.GaugeVec
	partDirtyAge   *prometheus.GaugeVec

	mu      sync.Mutex
	perWork map[int]roundResult // last round of each worker
}

func newMetrics(c *Cleaner, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{reg: reg, perWork: map[int]roundResult{}}
	g := func(name, help string) prometheus.Gauge {
		x := prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_cleaner_" + name, Help: help})
		m.collectors = append(m.collectors, x)
		return x
	}
	ctr := func(name, help string) prometheus.Counter {
		x := prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_cleaner_" + name, Help: help})
		m.collectors = append(m.collectors, x)
		return x
	}
	gf := func(name, help string, f func() float64) {
		m.collectors = append(m.collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_cleaner_" + name, Help: help}, f))
	}
	vec := func(name, help string) *prometheus.GaugeVec {
		x := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "strata_cleaner_" + name, Help: help}, []string{"topic", "partition"})
		m.collectors = append(m.collectors, x)
		return x
	}
	m.maxDirty = g("max_dirty_percent", "Dirty ratio x100 of the dirtiest compacted log at the last selection (Kafka max-dirty-percent).")
	m.recopy = g("recopy_percent", "100 x bytes written / bytes read over the last round of each worker (Kafka cleaner-recopy-percent).")
	m.recopyOld = g("cleaner_recopy_percent", "Deprecated: renamed strata_cleaner_recopy_percent (same value); this name will be removed.")
	m.maxCleanTime = g("max_clean_time_secs", "Longest last-round duration over the workers, seconds (Kafka max-clean-time-secs).")
	m.maxBufUtil = g("max_buffer_utilization_percent", "Offset map fill x100 of the last round, max over workers (Kafka max-buffer-utilization-percent).")
	m.maxDelay = g("max_compaction_delay_secs", "Longest time a cleanable record has waited past max.compaction.lag.ms, at the last selection (Kafka max-compaction-delay-secs).")
	gf("uncleanable_partitions_count", "Partitions whose last cleaning failed and that wait for a retry (Kafka uncleanable-partitions-count).", func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		n := 0
		for _, st := range c.parts {
			if st.failures > 0 {
				n++
			}
		}
		return float64(n)
	})
	gf("time_since_last_run_ms", "Milliseconds since the cleaner last selected a log (Kafka time-since-last-run-ms).", func() float64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.lastRun.IsZero() {
			return 0
		}
		return float64(c.now().Sub(c.lastRun).Milliseconds())
	})
	gf("dead_thread_count", "Cleaner workers that died (Kafka DeadThreadCount); panics are recovered, so this stays 0 while the cleaner runs.", func() float64 { return 0 })
	m.panics = ctr("panics_total", "Panics recovered in cleaner workers.")
	m.failures = ctr("failures_total", "Cleaning rounds that failed (retried with backoff).")
	m.rounds = ctr("rounds_total", "Cleaning rounds completed.")
	m.aborted = ctr("aborted_total", "Cleaning rounds abandoned because the segments changed meanwhile (retention, DeleteRecords); not failures.")
	m.bytesRead = ctr("bytes_read_total", "Bytes read by the cleaner (map build and recopy).")
	m.bytesWritten = ctr("bytes_written_total", "Bytes written by the cleaner.")
	m.recsRemoved = ctr("records_removed_total", "Records removed by compaction.")
	m.tombsRemoved = ctr("tombstones_removed_total", "Tombstones removed after their delete horizon.")
	m.abortedRemoved = ctr("aborted_records_removed_total", "Records of aborted transactions removed (also counted in records_removed_total).")
	m.markersRemoved = ctr("markers_removed_total", "Transaction markers removed after their delete horizon.")
	m.partDirtyRatio = vec("partition_dirty_ratio", "Dirty ratio of a compacted partition (0-1).")
	m.partDirtyBytes = vec("partition_dirty_bytes", "Cleanable dirty bytes of a compacted partition.")
	m.partDirtyAge = vec("partition_oldest_dirty_age_ms", "Age of the oldest dirty record of a compacted partition, ms.")
	if reg != nil {
		for i, x := range m.collectors {
			if err := reg.Register(x); err != nil {
				for _, y := range m.collectors[:i] {
					reg.Unregister(y)
				}
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, x := range m.collectors {
		m.reg.Unregister(x)
	}
	m.reg = nil
}

func labels(k tp) prometheus.Labels {
	return prometheus.Labels{"topic": k.Topic, "partition": strconv.Itoa(int(k.Partition))}
}

func (m *metrics) observePartition(k tp, cl cleanable, nowMs int64) {
	l := labels(k)
	m.partDirtyRatio.With(l).Set(cl.Ratio)
	m.partDirtyBytes.With(l).Set(float64(cl.DirtyBytes))
	age := 0.0
	if cl.OldestDirtyTs > 0 {
		age = float64(nowMs - cl.OldestDirtyTs)
	}
	m.partDirtyAge.With(l).Set(age)
}

func (m *metrics) forget(k tp) {
	l := labels(k)
	m.partDirtyRatio.Delete(l)
	m.partDirtyBytes.Delete(l)
	m.partDirtyAge.Delete(l)
}

func (m *metrics) observeRound(worker int, r roundResult) {
	m.rounds.Inc()
	m.bytesRead.Add(float64(r.Stats.BytesRead))
	m.bytesWritten.Add(float64(r.Stats.BytesWritten))
	m.recsRemoved.Add(float64(r.Stats.RecordsRemoved))
	m.tombsRemoved.Add(float64(r.Stats.TombstonesRemoved))
	m.abortedRemoved.Add(float64(r.Stats.AbortedRemoved))
	m.markersRemoved.Add(float64(r.Stats.MarkersRemoved))
	m.mu.Lock()
	defer m.mu.Unlock()
	m.perWork[worker] = r
	var read, written int64
	var maxT time.Duration
	maxU := 0.0
	for _, x := range m.perWork {
		read += x.Stats.BytesRead
		written += x.Stats.BytesWritten
		maxT = max(maxT, x.Duration)
		maxU = max(maxU, x.MapUtil)
	}
	if read > 0 {
		m.recopy.Set(100 * float64(written) / float64(read))
		m.recopyOld.Set(100 * float64(written) / float64(read))
	}
	m.maxCleanTime.Set(maxT.Seconds())
	m.maxBufUtil.Set(100 * maxU)
}
