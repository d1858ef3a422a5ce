package console

import (
	"context"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/strata-io/strata/internal/cleaner"
)

// History bounds: each series keeps its last historyLen samples (30
// minutes at the default 10 s); at most maxSeries series are kept (new
// ones wait for room), and a series whose partition or group is gone is
// dropped at the next sample. Lag is sampled for at most maxLagGroups
// groups. A sample is 16 bytes: the history holds at most ~12 MB.
const (
	historyLen   = 180
	maxSeries    = 4096
	maxLagGroups = 500
)

// Metric names the console reads from the broker's registry. A test
// checks that a running broker exports each of them. The partitions' log
// end offsets and sizes are read from Config.Partitions instead: a Gather
// of their series (five per partition) allocated ~30 MB per sample
// at 10,000 partitions.
const (
	metricTopicBytesIn  = "strata_topic_bytes_in_total"
	metricTopicBytesOut = "strata_topic_bytes_out_total"
	metricRequests      = "strata_requests_total"
)

// point is one sample: when (Unix milliseconds) and the value.
type point struct {
	Ms int64
	V  float64
}

// at is the sample's time.
func (p point) at() time.Time { return time.UnixMilli(p.Ms) }

// ring is a series' last historyLen samples.
type ring struct {
	pts  []point
	head int // next slot once full
	gen  uint64
}

func (r *ring) add(p point) {
	if len(r.pts) < historyLen {
		r.pts = append(r.pts, p)
		return
	}
	r.pts[r.head] = p
	r.head = (r.head + 1) % historyLen
}

// points returns the samples oldest first.
func (r *ring) points() []point {
	out := make([]point, 0, len(r.pts))
	out = append(out, r.pts[r.head:]...)
	return append(out, r.pts[:r.head]...)
}

// minRateWindow is the shortest time a rate is measured over: counters
// move at slightly different moments of a request (bytes when it is
// handled, the request count when it is answered), which only averages out
// over a window much longer than one request.
const minRateWindow = 200 * time.Millisecond

// rates are per-second rates between the last two samples at least
// minRateWindow apart.
type rates struct {
	Valid    bool // two samples exist
	At       time.Time
	BytesIn  float64
	BytesOut float64
	MsgsIn   float64
	Produce  float64 // Produce requests
	Fetch    float64 // Fetch requests
	// TopicMsgs are records appended per second, by topic, to the
	// partitions with a replica on this broker; TopicParts counts those
	// partitions (a topic's rate is known when it has all of them).
	TopicMsgs  map[string]float64
	TopicParts map[string]int
}

// counters are the registry totals of one sample.
type counters struct {
	at       time.Time
	bytesIn  float64
	bytesOut float64
	produce  float64
	fetch    float64
	// ends are the summed log end offsets by topic, over parts partitions.
	ends  map[string]float64
	parts map[string]int
	// sizes are the sizes of the partitions asked for (compacted ones).
	sizes map[partKey]float64
}

// partKey names a partition.
type partKey struct {
	topic     string
	partition int32
}

// history is the bounded in-memory record the plots draw.
type history struct {
	mu     sync.Mutex
	series map[string]*ring
	// lagTopics are, per group, the topics its last lag sample summed:
	// the sampler acts as the broker itself, so a page shows a group's
	// plot only to a user whose own OffsetFetch sees all of them.
	lagTopics map[string]map[string]bool
	gen       uint64
	prev      *counters
	rates     rates
}

func newHistory() *history {
	return &history{series: map[string]*ring{}, lagTopics: map[string]map[string]bool{}}
}

// lagCovered reports whether topics (those a user's OffsetFetch of group
// answered) include every topic of group's lag samples.
func (h *history) lagCovered(group string, topics map[string]bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for t := range h.lagTopics[group] {
		if !topics[t] {
			return false
		}
	}
	return true
}

// Series keys.
func sizeKey(topic string, p int32) string { return "size\x00" + topic + "\x00" + strconv.Itoa(int(p)) }
func dirtyKey(topic string, p int32) string {
	return "dirty\x00" + topic + "\x00" + strconv.Itoa(int(p))
}
func lagKey(group string) string { return "lag\x00" + group }

const (
	keyBytesIn = "rate\x00in"
	keyMsgsIn  = "rate\x00msgs"
)

// record adds values at t to their series (under h.mu).
func (h *history) recordLocked(t time.Time, vals map[string]float64) {
	for k, v := range vals {
		r := h.series[k]
		if r == nil {
			if len(h.series) >= maxSeries {
				continue
			}
			r = &ring{}
			h.series[k] = r
		}
		r.add(point{t.UnixMilli(), v})
		r.gen = h.gen
	}
}

// sweepLocked drops the series not updated by the current sample.
func (h *history) sweepLocked() {
	for k, r := range h.series {
		if r.gen != h.gen {
			delete(h.series, k)
		}
	}
}

// get returns a series, oldest first.
func (h *history) get(key string) []point {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.series[key]; r != nil {
		return r.points()
	}
	return nil
}

// lastRates returns the latest rates.
func (h *history) lastRates() rates {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rates
}

// sampleLoop samples at once, then every SampleInterval until ctx ends.
func (c *Console) sampleLoop(ctx context.Context) {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.SampleNow(ctx)
		c.clients.evictIdle()
		t.Reset(c.cfg.SampleInterval)
	}
}

// SampleNow takes one history sample: the registry's counters (rates and
// partition sizes), the cleaner's dirty ratios and the groups' lag. The
// sampler calls it every SampleInterval; tests call it to get plots
// without waiting.
func (c *Console) SampleNow(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	now := time.Now()
	vals := map[string]float64{}
	var compacted []cleaner.PartitionStatus
	if c.cfg.Compaction != nil {
		compacted = c.cfg.Compaction.Status("")
	}
	cur := c.gatherCounters(now, compacted)
	var lagSampled bool
	lagTopics := map[string]map[string]bool{}
	if groups, err := c.sampler.adm.ListGroups(ctx); err == nil {
		names := groups.Groups()
		if len(names) > maxLagGroups {
			names = names[:maxLagGroups]
		}
		if lags, err := c.sampler.lags(ctx, names...); err == nil {
			lagSampled = true
			for g, rows := range lags {
				if l := totalLag(rows); l >= 0 {
					vals[lagKey(g)] = float64(l)
				}
				ts := map[string]bool{}
				for _, r := range rows {
					ts[r.Topic] = true
				}
				lagTopics[g] = ts
			}
		} else {
			c.logger.Debug("lag sample failed", "err", err)
		}
	}
	for _, st := range compacted {
		vals[dirtyKey(st.Topic, st.Partition)] = st.DirtyRatio
		if cur != nil {
			if sz, ok := cur.sizes[partKey{st.Topic, st.Partition}]; ok {
				vals[sizeKey(st.Topic, st.Partition)] = sz
			}
		}
	}
	h := c.hist
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	fresh := cur != nil && (h.prev == nil || cur.at.Sub(h.prev.at) >= minRateWindow)
	if fresh && h.prev != nil {
		dt := cur.at.Sub(h.prev.at).Seconds()
		{
			rate := func(a, b float64) float64 { return max(0, a-b) / dt }
			r := rates{
				Valid: true, At: cur.at,
				BytesIn: rate(cur.bytesIn, h.prev.bytesIn), BytesOut: rate(cur.bytesOut, h.prev.bytesOut),
				Produce: rate(cur.produce, h.prev.produce), Fetch: rate(cur.fetch, h.prev.fetch),
				TopicMsgs: map[string]float64{}, TopicParts: cur.parts,
			}
			for t, e := range cur.ends {
				if pe, ok := h.prev.ends[t]; ok {
					r.TopicMsgs[t] = rate(e, pe)
					r.MsgsIn += r.TopicMsgs[t]
				}
			}
			h.rates = r
			vals[keyBytesIn] = r.BytesIn
			vals[keyMsgsIn] = r.MsgsIn
		}
	}
	if fresh {
		h.prev = cur
	}
	if lagSampled {
		h.lagTopics = lagTopics
	} else {
		// Keep the lag series alive through a failed sample.
		for k, r := range h.series {
			if len(k) > 4 && k[:4] == "lag\x00" {
				r.gen = h.gen
			}
		}
	}
	for _, k := range []string{keyBytesIn, keyMsgsIn} {
		if r := h.series[k]; r != nil {
			r.gen = h.gen // a sample too close to the last one has no rate
		}
	}
	h.recordLocked(now, vals)
	h.sweepLocked()
}

// gatherCounters reads the totals the rates come from, and the sizes of
// the compacted partitions (nil when the registry cannot be read). The
// registry gives the byte and request counters (a few series per topic and
// API); the partitions' log end offsets and sizes come from
// Config.Partitions, summed here without building a metric per partition.
func (c *Console) gatherCounters(now time.Time, compacted []cleaner.PartitionStatus) *counters {
	if c.cfg.Metrics == nil {
		return nil
	}
	mfs, err := c.cfg.Metrics.Gather()
	if err != nil && len(mfs) == 0 {
		c.logger.Debug("gather metrics failed", "err", err)
		return nil
	}
	cur := &counters{at: now, ends: map[string]float64{}, parts: map[string]int{}, sizes: map[partKey]float64{}}
	for _, mf := range mfs {
		switch mf.GetName() {
		case metricTopicBytesIn:
			cur.bytesIn = sumValues(mf)
		case metricTopicBytesOut:
			cur.bytesOut = sumValues(mf)
		case metricRequests:
			for _, m := range mf.GetMetric() {
				switch label(m, "api") {
				case "Produce":
					cur.produce += value(m)
				case "Fetch":
					cur.fetch += value(m)
				}
			}
		}
	}
	if c.cfg.Partitions != nil {
		want := make(map[partKey]bool, len(compacted))
		for _, st := range compacted {
			want[partKey{st.Topic, st.Partition}] = true
		}
		c.cfg.Partitions.EachPartition(func(topic string, partition int32, size, logEnd int64) {
			cur.ends[topic] += float64(logEnd)
			cur.parts[topic]++
			if k := (partKey{topic, partition}); want[k] {
				cur.sizes[k] = float64(size)
			}
		})
	}
	return cur
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

func sumValues(mf *dto.MetricFamily) float64 {
	var s float64
	for _, m := range mf.GetMetric() {
		s += value(m)
	}
	return s
}
