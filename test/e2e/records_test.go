package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// payload is record n's value: its number then 40..400 bytes derived from n
// alone, so any stored value can be checked byte for byte.
func payload(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 0x5eed))
	b := []byte(fmt.Sprintf("v%09d|", n))
	for i, size := 0, 40+r.IntN(361); i < size; i++ {
		b = append(b, byte(r.IntN(256)))
	}
	return b
}

// numberOf parses the record number out of a value ("v%09d|...").
func numberOf(v []byte) (int, bool) {
	if len(v) < 11 || v[0] != 'v' || v[10] != '|' {
		return 0, false
	}
	n, err := strconv.Atoi(string(v[1:10]))
	return n, err == nil
}

// ackLog records what a producer sent and what the broker acknowledged.
type ackLog struct {
	mu    sync.Mutex
	acked map[int]bool
	sent  int // numbers below sent were handed to a producer
	errs  map[string]int
}

func newAckLog() *ackLog { return &ackLog{acked: map[int]bool{}, errs: map[string]int{}} }

func (a *ackLog) ackedCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked)
}

// produceUntil produces records numbered from a.sent on with mk (which sets
// key, partition and value) through a fresh idempotent acks=all client until
// stop is closed; then it closes the client (failing whatever is unanswered)
// and returns. It runs in its own goroutine, so it reports errors instead
// of failing the test.
// extra client options come last (acks=1 runs pass RequiredAcks etc).
func produceUntil(addr, topic string, a *ackLog, mk func(n int) *kgo.Record, stop <-chan struct{}, extra ...kgo.Opt) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(8 << 10),
		kgo.MaxBufferedRecords(2000),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // owner: produceUntil; ends when stop closes
		<-stop
		cancel() // unblocks a Produce waiting for buffer space
	}()
	var wg sync.WaitGroup
	for {
		select {
		case <-stop:
			cancel()
			closed := make(chan struct{})
			go func() { // owner: produceUntil; ends when Close returns
				cl.Close()
				close(closed)
			}()
			select {
			case <-closed:
			case <-time.After(60 * time.Second):
				return fmt.Errorf("kgo client Close did not return within 60s after the broker was killed")
			}
			wg.Wait()
			return nil
		default:
		}
		a.mu.Lock()
		n := a.sent
		a.sent++
		a.mu.Unlock()
		wg.Add(1)
		cl.Produce(ctx, mk(n), func(_ *kgo.Record, err error) {
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
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// stored is one record read back.
type stored struct {
	partition int32
	offset    int64
	key       []byte
	value     []byte
	num       int // from the "n" header, -1 if none
	pid       int64
	epoch     int16
}

// readAll reads every partition of topic from its start to its high
// watermark as of the call.
func readAll(t *testing.T, ctx context.Context, addr, topic string) map[int32][]stored {
	t.Helper()
	adm := newAdmin(t, addr)
	// A broker just started elects its partitions' leaders after it
	// registers (a one-node cluster too): retriable errors such as
	// LEADER_NOT_AVAILABLE are retried, as a client does.
	var ends, starts kadm.ListedOffsets
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		ends, err = adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			starts, err = adm.ListStartOffsets(ctx, topic)
			if err == nil {
				err = starts.Error()
			}
		}
		if err == nil {
			break
		}
		if !kerr.IsRetriable(err) || time.Now().After(deadline) {
			t.Fatalf("list offsets of %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	need := map[int32]int64{}
	start := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		start[o.Partition] = kgo.NewOffset().AtStart()
		if s, _ := starts.Lookup(topic, o.Partition); o.Offset > s.Offset {
			need[o.Partition] = o.Offset
		}
	})
	out := map[int32][]stored{}
	if len(need) == 0 {
		return out
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for len(need) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: still waiting for partitions %v (up to end offsets) when the deadline passed", topic, need)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			num := -1
			for _, h := range r.Headers {
				if h.Key == "n" {
					if v, err := strconv.Atoi(string(h.Value)); err == nil {
						num = v
					}
				}
			}
			out[r.Partition] = append(out[r.Partition], stored{r.Partition, r.Offset, r.Key, r.Value, num, r.ProducerID, r.ProducerEpoch})
			if end, ok := need[r.Partition]; ok && r.Offset >= end-1 {
				delete(need, r.Partition)
			}
		})
	}
	return out
}

// newAdmin returns a kadm client closed in t.Cleanup.
func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// newAdminFrom wraps an existing client.
func newAdminFrom(cl *kgo.Client) *kadm.Client { return kadm.NewClient(cl) }

// checkValue checks that a stored record is exactly record n as sent.
func checkValue(r stored, key []byte, partition int32) error {
	n, ok := numberOf(r.value)
	if !ok {
		return fmt.Errorf("partition %d offset %d: value is no record we sent: %.40q", r.partition, r.offset, r.value)
	}
	if !bytes.Equal(r.value, payload(n)) {
		return fmt.Errorf("partition %d offset %d: value of record %d differs from what was sent", r.partition, r.offset, n)
	}
	if !bytes.Equal(r.key, key) || r.partition != partition {
		return fmt.Errorf("partition %d offset %d: record %d has key %q (want %q) in partition %d (want %d)", r.partition, r.offset, n, r.key, key, r.partition, partition)
	}
	return nil
}

// sortedKeys is a map's keys in order (for stable messages).
func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}
