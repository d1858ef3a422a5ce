package server_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A producer_byte_rate of 1 MB/s holds a franz-go producer sending as
// fast as it can within ±10 % over 30 s, and the broker reports
// throttle_time_ms (kgo waits it out before its next request, KIP-219).
// The rate is measured on the record values the broker acknowledged (the
// quota counts whole requests: about 1.5 % more), from the first send to
// the last acknowledgement. It measures time, so it runs
// only with STRATA_LONG=1 (a loaded machine could fall short of 1 MB/s).
//
// STRATA_LONG=1 go test ./internal/server -run TestProducerQuotaHoldsRate -v
func TestProducerQuotaHoldsRate(t *testing.T) {
	if os.Getenv("STRATA_LONG") == "" {
		t.Skip("a 30 s rate measurement: set STRATA_LONG=1")
	}
	tb := startSecure(t, map[string]string{"allow.everyone.if.no.acl.found": "true"})
	ctx := ctxT(t)
	admin := adminAs(tb, "admin")
	if _, err := admin.CreateTopic(ctx, 1, 1, nil, "rate"); err != nil {
		t.Fatal(err)
	}
	const quota = 1 << 20 // bytes per second
	if res, err := admin.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: kadm.StringPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: quota}},
	}}); err != nil || res[0].Err != nil {
		t.Fatalf("alter quotas: %+v %v", res, err)
	}
	var throttles, throttledMs atomic.Int64
	hook := throttleHook{fn: func(ms int32) {
		if ms > 0 {
			throttles.Add(1)
			throttledMs.Add(int64(ms))
		}
	}}
	cl := as(tb, "alice", kgo.DefaultProduceTopic("rate"), kgo.MaxBufferedRecords(2000),
		kgo.ProducerBatchMaxBytes(64<<10), kgo.WithHooks(hook),
		// The quota counts request bytes as sent: uncompressed records
		// make them the records' bytes (plus batch and record headers).
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := make([]byte, 1000)
	const run = 30 * time.Second
	var acked atomic.Int64
	start := time.Now()
	pctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	for pctx.Err() == nil {
		cl.Produce(pctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
			if err == nil {
				acked.Add(int64(len(r.Value)))
			}
		})
	}
	// Records still buffered when the 30 s ran out failed with the
	// context; what was acknowledged counts.
	_ = cl.Flush(context.Background())
	elapsed := time.Since(start)
	rate := float64(acked.Load()) / elapsed.Seconds()
	t.Logf("acknowledged %d bytes in %v: %.0f B/s = %.1f %% of the %d B/s quota; %d responses throttled, %d ms in all",
		acked.Load(), elapsed.Round(time.Millisecond), rate, 100*rate/quota, quota, throttles.Load(), throttledMs.Load())
	if rate < 0.9*quota || rate > 1.1*quota {
		t.Errorf("producer held at %.0f B/s, want %d ±10 %%", rate, quota)
	}
	if throttles.Load() == 0 {
		t.Error("no response carried throttle_time_ms")
	}
}

// throttleHook reports the throttle_time_ms of every response kgo reads.
type throttleHook struct{ fn func(ms int32) }

// OnBrokerThrottle implements kgo.HookBrokerThrottle.
func (h throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.fn(int32(d / time.Millisecond))
}
