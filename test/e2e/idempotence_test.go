package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/freeport"
)

// freePort returns a port reserved for this test (internal/freeport).
func freePort(t testing.TB) int {
	t.Helper()
	return freeport.Take(t, 1)[0]
}

// TestIdempotenceAcrossCrash keeps ONE idempotent acks=all producer running
// while the broker is SIGKILLed and restarted on the same port several
// times. The client retries its in-flight batches with the same producer
// id and sequence numbers against the restarted broker, so the broker must
// rebuild its producer state: at the end every record is acknowledged and
// stored exactly once, in order.
func TestIdempotenceAcrossCrash(t *testing.T) {
	t.Run("default segments", func(t *testing.T) { idempotenceAcrossCrash(t, "1073741824") })
	t.Run("segment rolls inside the in-flight window", func(t *testing.T) {
		idempotenceAcrossCrash(t, "16384")
	})
}

// idempotenceAcrossCrash runs the scenario with topic segment.bytes seg.
func idempotenceAcrossCrash(t *testing.T, seg string) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	dir := t.TempDir()
	listen := "PLAINTEXT://127.0.0.1:" + strconv.Itoa(freePort(t))
	flags := []string{"--listeners", listen}
	p := startBroker(t, dir, flags...)
	// The context bounds the whole run: 50 rounds with STRATA_LONG=1 take
	// several minutes.
	ctx := ctxFor(t, 2*time.Minute+time.Duration(crashRounds())*15*time.Second)
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, crashPartitions, 1, map[string]*string{"segment.bytes": &seg}, "idem"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	var clientLog syncBuffer
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.DefaultProduceTopic("idem"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(8<<10),
		kgo.MaxBufferedRecords(1000), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.WithLogger(kgo.BasicLogger(&clientLog, kgo.LogLevelInfo, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	a := newAckLog()
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	prodDone := make(chan struct{})
	go func() { // owner: this test; ends when stop is called
		defer close(prodDone)
		for pctx.Err() == nil {
			a.mu.Lock()
			n := a.sent
			a.sent++
			a.mu.Unlock()
			wg.Add(1)
			cl.Produce(pctx, &kgo.Record{Key: []byte(fmt.Sprintf("n%09d", n)), Value: payload(n), Partition: int32(n % crashPartitions)},
				func(_ *kgo.Record, err error) {
					defer wg.Done()
					a.mu.Lock()
					defer a.mu.Unlock()
					if err == nil {
						a.acked[n] = true
					} else {
						a.errs[firstLine(err.Error())]++
					}
				})
		}
	}()
	for round := 1; round <= crashRounds(); round++ {
		target := a.ackedCount() + 50 + rng.IntN(1000)
		deadline := time.Now().Add(90 * time.Second)
		for a.ackedCount() < target && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if a.ackedCount() < target {
			stop()
			t.Fatalf("round %d: acknowledgements stalled at %d (want %d) within 90s; errors %v", round, a.ackedCount(), target, a.errs)
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		p.Kill()
		p = startBroker(t, dir, flags...)
	}
	stop() // records not yet handed over fail with the context error
	<-prodDone
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		t.Errorf("flush after the last restart: %v", err)
	}
	wg.Wait()
	defer func() {
		if t.Failed() {
			var keep []string
			for _, l := range strings.Split(clientLog.String(), "\n") {
				if !strings.Contains(l, "connection refused") && !strings.Contains(l, "connection reset") {
					keep = append(keep, l)
				}
			}
			t.Logf("producer client log (without connection errors):\n%s", strings.Join(keep, "\n"))
		}
	}()
	got := readAll(t, ctx, p.Kafka, "idem")
	total := 0
	for _, rs := range got {
		total += len(rs)
	}
	a.mu.Lock()
	t.Logf("sent %d, acknowledged %d, stored %d; errors %v", a.sent, len(a.acked), total, a.errs)
	a.mu.Unlock()
	checkAppendOnly(t, got, a)
}

// syncBuffer is a goroutine-safe strings.Builder for client logs.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
