package quota

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/clock"
)

// TestReplicationQuota: Kafka's ReplicationQuotaManager on a SimpleRate.
// Unbounded by default; with a bound the quota is exceeded once the bytes
// recorded over max(elapsed, one window) pass it, and recovers as time
// passes; only the partitions marked throttled count (a nil quota throttles
// nothing).
func TestReplicationQuota(t *testing.T) {
	c := clock.NewManual(time.Unix(1000, 0))
	q := NewReplication(Window{Samples: 11, SizeMs: 1000}, c)
	q.Record(1 << 30)
	if q.Exceeded() || q.Bound() != math.MaxInt64 {
		t.Fatal("an unbounded quota is never exceeded")
	}
	q = NewReplication(Window{Samples: 11, SizeMs: 1000}, c)
	q.SetBound(1000)
	q.Record(1000)
	if q.Exceeded() {
		t.Fatal("1000 bytes in the first window: at the bound, not over")
	}
	q.Record(1)
	if !q.Exceeded() {
		t.Fatal("1001 bytes in one window: over 1000 B/s")
	}
	c.Advance(1500 * time.Millisecond)
	if q.Exceeded() {
		t.Fatal("1001 bytes over 1.5 s: within 1000 B/s")
	}
	// Samples idle for samples x window are forgotten.
	q.Record(5000)
	c.Advance(12 * time.Second)
	if q.Exceeded() {
		t.Fatal("old samples still counted")
	}
	if q.Recorded() != 6001 {
		t.Fatalf("recorded %d", q.Recorded())
	}

	q.SetThrottled(map[string][]int32{"a": {0, 2}, "b": AllReplicas})
	for _, c := range []struct {
		topic string
		p     int32
		want  bool
	}{{"a", 0, true}, {"a", 1, false}, {"a", 2, true}, {"b", 7, true}, {"c", 0, false}} {
		if got := q.IsThrottled(c.topic, c.p); got != c.want {
			t.Errorf("IsThrottled(%s, %d) = %v", c.topic, c.p, got)
		}
	}
	var nilQ *Replication
	if nilQ.IsThrottled("a", 0) || nilQ.Exceeded() {
		t.Fatal("nil quota throttles")
	}
	nilQ.Record(1)
}

// TestParseThrottledReplicas: Kafka's TopicConfigHandler.parseThrottledPartitions.
func TestParseThrottledReplicas(t *testing.T) {
	for _, c := range []struct {
		v    string
		id   int32
		want []int32
		ok   bool
	}{
		{"", 1, nil, true},
		{"*", 1, AllReplicas, true},
		{"0:1,1:2,2:1", 1, []int32{0, 2}, true},
		{" 0:1 , 3:1", 1, []int32{0, 3}, true},
		{"0:2", 1, nil, true},
		{"0:x", 1, nil, false},
		{"0", 1, nil, false},
	} {
		got, ok := ParseThrottledReplicas(c.v, c.id)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("%q on %d: %v %v", c.v, c.id, got, ok)
		}
	}
}
