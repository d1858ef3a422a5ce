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
//
// The rate is taken from the broker's own accounting, not the test's
// clock: the topic stamps every batch with the broker's append time
// (message.timestamp.type=LogAppendTime), and the rate is the record bytes
// appended in the 30 s from the first append, read back afterwards. A
// stalled test process or client cannot stretch the measured time, only
// send less (which Kafka's windowed rate then lets it catch up on).
//
// quota.window.num=2: Kafka's rate is measured over at least
// quota.window.num-1 whole samples, so with the default 11 x 1 s a
// producer may send up to ~10 s of its quota at once whenever the old
// samples expire (about every 11 s), and a 30 s measurement swings with
// where those bursts fall: 75-112 % in the simulation of
// internal/quota.TestProducerHeldAtQuotaSliding. With 2 x 1 s the bursts
// are about one second of quota and every 30 s window is within ±5 %.
//
// It takes 35 s, so it runs only with STRATA_LONG=1:
//
// STRATA_LONG=1 go test ./internal/server -run TestProducerQuotaHoldsRate -v
func TestProducerQuotaHoldsRate(t *testing.T) {
	if os.Getenv("STRATA_LONG") == "" {
		t.Skip("a 30 s rate measurement: set STRATA_LONG=1")
	}
	tb := startSecure(t, map[string]string{"allow.everyone.if.no.acl.found": "true", "quota.window.num": "2"})
	ctx := ctxT(t)
	admin := adminAs(tb, "admin")
	if _, err := admin.CreateTopic(ctx, 1, 1, map[string]*string{"message.timestamp.type": kadm.StringPtr("LogAppendTime")}, "rate"); err != nil {
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
		// make them the records' bytes (plus batch and record headers,
		// about 1 % with 1,000-byte values).
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	val := make([]byte, 1000)
	const window = 30 * time.Second
	// Produce a little longer than the window, so that it is full.
	pctx, cancel := context.WithTimeout(context.Background(), window+5*time.Second)
	defer cancel()
	var sent atomic.Int64
	for pctx.Err() == nil {
		cl.Produce(pctx, &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err == nil {
				sent.Add(1)
			}
		})
	}
	_ = cl.Flush(context.Background()) // what was buffered at the end failed with the context
	total := sent.Load()

	// Read back every acknowledged record (as the super user, who has no
	// quota) with its append time.
	cons := as(tb, "admin", kgo.ConsumeTopics("rate"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var first time.Time
	var inWindow, read int64
	for read < total {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if read == 0 {
				first = r.Timestamp
			}
			read++
			if r.Timestamp.Sub(first) < window {
				inWindow += int64(len(r.Value))
			}
		})
	}
	rate := float64(inWindow) / window.Seconds()
	t.Logf("%d bytes appended in the %v from the first append: %.0f B/s = %.1f %% of the %d B/s quota; %d records acknowledged; %d responses throttled, %d ms in all",
		inWindow, window, rate, 100*rate/quota, quota, total, throttles.Load(), throttledMs.Load())
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
