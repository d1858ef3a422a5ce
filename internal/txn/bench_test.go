package txn

import (
	"fmt"
	"testing"
)

// BenchmarkVerifyProduce measures the per-batch check Produce makes for
// transactional batches (the coordinator's hot path).
func BenchmarkVerifyProduce(b *testing.B) {
	h := newHarness(b)
	var pids [64]int64
	for i := range pids {
		id := fmt.Sprintf("tx-%d", i)
		pids[i], _ = h.init(id)
		h.add(id, pids[i], 0, tp("t", int32(i%8)))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		n := i % len(pids)
		if err := h.c.VerifyProduce(fmt.Sprintf("tx-%d", n), pids[n], 0, tp("t", int32(n%8))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStateValue measures encoding one __transaction_state value.
func BenchmarkStateValue(b *testing.B) {
	tr := transit{producerID: 7, epoch: 3, timeoutMs: 60000, state: stateOngoing, startMs: 1, lastUpdateMs: 2,
		parts: []TopicPartition{{"a", 0}, {"a", 1}, {"b", 0}, {"__consumer_offsets", 3}}}
	b.ReportAllocs()
	for b.Loop() {
		_ = stateValue(tr)
	}
}
