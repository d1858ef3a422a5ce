package quota

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/strata-io/strata/internal/clock"
)

// Replication is one of Kafka's two replication quotas
// (kafka.server.ReplicationQuotaManager, KIP-73): the leader's, bounding
// the bytes of throttled partitions it sends to followers
// (leader.replication.throttled.rate), or the follower's, bounding the
// bytes of throttled partitions it fetches
// (follower.replication.throttled.rate). Only the partitions named by the
// topic settings leader/follower.replication.throttled.replicas for this
// broker count (SetThrottled); the rate is Kafka's SimpleRate over
// replication.quota.window.num samples of
// replication.quota.window.size.seconds. Who consults it and how is the
// caller's (internal/replica): a throttled partition of a replica that is
// not in sync is left out while the quota is exceeded. Safe for
// concurrent use; a nil *Replication throttles nothing.
type Replication struct {
	clock  clock.Clock
	window Window

	bound     atomic.Int64 // bytes/s; math.MaxInt64: unbounded (Kafka's default)
	throttled atomic.Pointer[map[string][]int32]

	mu   sync.Mutex
	rate rate

	recorded atomic.Int64 // bytes recorded since start (metrics, tests)
	skipped  atomic.Int64 // partitions left out of a fetch or an answer
}

// AllReplicas marks every partition of a topic throttled (the topic
// setting "*"; Kafka's Constants.AllReplicas).
var AllReplicas = []int32{-1}

// NewReplication returns an unbounded replication quota sampling over w.
func NewReplication(w Window, c clock.Clock) *Replication {
	if c == nil {
		c = clock.Real()
	}
	if w.Samples <= 0 || w.SizeMs <= 0 {
		w = DefaultWindow
	}
	q := &Replication{clock: c, window: w}
	q.bound.Store(math.MaxInt64)
	empty := map[string][]int32{}
	q.throttled.Store(&empty)
	return q
}

// SetBound sets the quota in bytes per second (math.MaxInt64: none).
func (q *Replication) SetBound(bytesPerSec int64) { q.bound.Store(bytesPerSec) }

// Bound is the quota in bytes per second (math.MaxInt64: none).
func (q *Replication) Bound() int64 {
	if q == nil {
		return math.MaxInt64
	}
	return q.bound.Load()
}

// SetThrottled replaces the throttled partitions: topic -> partition ids,
// AllReplicas for every partition (Kafka's markThrottled/removeThrottle
// from TopicConfigHandler). m is not retained.
func (q *Replication) SetThrottled(m map[string][]int32) {
	c := make(map[string][]int32, len(m))
	for t, ps := range m {
		c[t] = append([]int32(nil), ps...)
	}
	q.throttled.Store(&c)
}

// IsThrottled reports whether the partition counts against this quota
// (Kafka's ReplicationQuotaManager.isThrottled).
func (q *Replication) IsThrottled(topic string, partition int32) bool {
	if q == nil {
		return false
	}
	ps, ok := (*q.throttled.Load())[topic]
	if !ok {
		return false
	}
	for _, p := range ps {
		if p == partition || p == -1 {
			return true
		}
	}
	return false
}

// Exceeded reports whether the measured rate is above the bound (Kafka's
// isQuotaExceeded: Sensor.checkQuotas on a SimpleRate).
func (q *Replication) Exceeded() bool {
	if q == nil {
		return false
	}
	b := q.bound.Load()
	if b == math.MaxInt64 {
		return false
	}
	now := q.clock.Now().UnixMilli()
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.simpleRate(now) > float64(b)
}

// simpleRate is Kafka's SimpleRate: the samples' sum over the time since
// the oldest sample began, counted as at least one sample window (not
// Rate's samples-1 windows: a new throttle bites within a window).
func (q *Replication) simpleRate(now int64) float64 {
	q.rate.purge(q.window, now)
	if len(q.rate.samples) == 0 {
		return 0
	}
	total := 0.0
	oldest := q.rate.samples[0].startMs
	for _, s := range q.rate.samples {
		total += s.value
		oldest = min(oldest, s.startMs)
	}
	return total / (float64(max(now-oldest, q.window.SizeMs)) / 1000)
}

// Record adds n bytes to the rate, whether or not that exceeds the quota
// (Kafka's ReplicationQuotaManager.record).
func (q *Replication) Record(n int64) {
	if q == nil || n <= 0 {
		return
	}
	q.recorded.Add(n)
	now := q.clock.Now().UnixMilli()
	q.mu.Lock()
	q.rate.record(q.window, float64(n), now)
	q.mu.Unlock()
}

// Skipped counts one partition left out because of this quota.
func (q *Replication) Skipped() {
	if q != nil {
		q.skipped.Add(1)
	}
}

// Recorded is the total of the bytes recorded (metrics).
func (q *Replication) Recorded() int64 { return q.recorded.Load() }

// SkippedCount is how many times a partition was left out of a fetch (or
// a fetch answer) because the quota was exceeded.
func (q *Replication) SkippedCount() int64 { return q.skipped.Load() }

// ParseThrottledReplicas reads a leader/follower.replication.throttled.replicas
// value and returns the partitions it throttles on broker id: "" none, "*"
// all (AllReplicas), else the partitions of the [partition]:[broker]
// entries naming id (Kafka's TopicConfigHandler.parseThrottledPartitions).
// ok is false when the value is malformed (ValidThrottledReplicas).
func ParseThrottledReplicas(value string, id int32) (parts []int32, ok bool) {
	v := strings.TrimSpace(value)
	switch v {
	case "":
		return nil, true
	case "*":
		return AllReplicas, true
	}
	for _, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		p, b, found := strings.Cut(e, ":")
		if !found {
			return nil, false
		}
		pi, err1 := strconv.ParseInt(p, 10, 32)
		bi, err2 := strconv.ParseInt(b, 10, 32)
		if err1 != nil || err2 != nil || pi < 0 || bi < 0 {
			return nil, false
		}
		if int32(bi) == id {
			parts = append(parts, int32(pi))
		}
	}
	return parts, true
}
