package cleaner

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/clock"
)

func TestThrottler(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	for _, rate := range []float64{0, math.Inf(1), math.MaxFloat64} {
		th := newThrottler(rate, clk.Now)
		if err := th.wait(context.Background(), 1<<30); err != nil || th.throttledNs != 0 {
			t.Fatalf("rate %v: throttled", rate)
		}
	}
	th := newThrottler(1000, clk.Now)
	if err := th.wait(context.Background(), 10); err != nil || th.throttledNs != 0 {
		t.Fatal("under the rate: throttled")
	}
	// 10 s worth of bytes at once: the throttler sleeps about 10 s, and a
	// cancelled context ends the sleep.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := th.wait(ctx, 10_000)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want cancellation, got %v", err)
	}
	if d := time.Duration(th.throttledNs); d < 9*time.Second || d > 11*time.Second {
		t.Fatalf("planned sleep %v, want ~10s", d)
	}
	var nilT *throttler
	if nilT.wait(context.Background(), 5) != nil {
		t.Fatal("nil throttler")
	}
}
