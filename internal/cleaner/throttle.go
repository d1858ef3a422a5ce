package cleaner

import (
	"context"
	"math"
	"sync"
	"time"
)

// throttler limits the cleaner's I/O (bytes read plus written, all workers
// together) to log.cleaner.io.max.bytes.per.second, checking every
// checkInterval like Kafka's Throttler.
type throttler struct {
	mu          sync.Mutex
	rate        float64 // bytes per second; <= 0 or +Inf = unlimited
	start       time.Time
	bytes       float64
	now         func() time.Time
	throttledNs int64
}

const checkInterval = 100 * time.Millisecond

func newThrottler(rate float64, now func() time.Time) *throttler {
	return &throttler{rate: rate, now: now, start: now()}
}

func (t *throttler) unlimited() bool {
	return t.rate <= 0 || math.IsInf(t.rate, 1) || t.rate >= math.MaxFloat64
}

// wait accounts n bytes and sleeps as long as needed to stay under the
// rate, or until ctx ends.
func (t *throttler) wait(ctx context.Context, n int) error {
	if t == nil || t.unlimited() || n <= 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bytes += float64(n)
	elapsed := t.now().Sub(t.start)
	if elapsed < checkInterval && t.bytes < t.rate*checkInterval.Seconds() {
		return nil
	}
	want := time.Duration(t.bytes / t.rate * float64(time.Second))
	if d := want - elapsed; d > 0 {
		t.throttledNs += int64(d)
		tm := time.NewTimer(d)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
	t.start = t.now()
	t.bytes = 0
	return nil
}
