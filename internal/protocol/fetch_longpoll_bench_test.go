package protocol

import (
	"strconv"
	"testing"

	"github.com/strata-io/strata/internal/broker"
)

// BenchmarkFetchLongPoll is issue 18's long poll over many partitions: a
// consumer's fetch over a topic of 1 or 1,000 partitions, none of which
// holds anything past the consumer's offset, so the fetch long-polls;
// once it is about to block (Server.fetchWaits) one record is appended to
// the next partition, which wakes it and is answered. "session" is an
// incremental fetch of a KIP-227 session (the common consumer case),
// "sessionless" a full fetch with session epoch -1 (every partition named
// and read each time). Durable acks are off (an fsync per op is not the
// fetch's cost). ns/op and allocs/op include the append; cpu-ns/op is
// the process's CPU time per op (getrusage), steadier than ns/op on a
// loaded machine.
//
//	go test ./internal/protocol -run '^$' -bench FetchLongPoll -benchmem
func BenchmarkFetchLongPoll(b *testing.B) {
	for _, n := range []int{1, 1000} {
		for _, mode := range []string{"session", "sessionless"} {
			b.Run("partitions="+strconv.Itoa(n)+"/"+mode, func(b *testing.B) { benchFetchLongPoll(b, n, mode == "session") })
		}
	}
}

func benchFetchLongPoll(b *testing.B, n int, session bool) {
	val := make([]byte, 512)
	srv, parts := newFetchBenchTopic(b, n, val)
	appendOne := func(p *broker.Partition) {
		if err := appendValue(p, val, 1); err != nil {
			b.Error(err)
		}
	}
	// Every partition holds one record and the consumer is past it.
	offsets := make([]int64, n)
	for i := range offsets {
		offsets[i] = 1
	}
	fetch := func(id, epoch int32, named []int) *fetchReply {
		return fetchNamed(b, srv, id, epoch, 10_000, named, offsets)
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	id, epoch := int32(0), int32(-1)
	var named []int
	if session {
		// Open the session with a fetch that does not wait.
		offsets[0] = 0
		fr := fetch(0, 0, all)
		if id = fr.sessionID; id == 0 {
			b.Fatal("no session")
		}
		fr.release()
		epoch, offsets[0] = 1, 1
		named = []int{0}
	}
	k, appended := 0, false
	srv.fetchWaits = func() {
		if !appended {
			appended = true
			appendOne(parts[k])
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k, appended = (i+1)%n, false
		if !session {
			named = all
		}
		fr := fetch(id, epoch, named)
		if fr.errorCode != 0 || fr.bytes == 0 || !appended {
			b.Fatalf("fetch %d: error %d, %d bytes, appended %v", i, fr.errorCode, fr.bytes, appended)
		}
		fr.release()
		offsets[k]++
		if session {
			epoch = nextEpoch(epoch)
			named = append(named[:0], k)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
