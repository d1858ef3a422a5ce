package protocol

import (
	"strconv"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/broker"
)

// BenchmarkFetchSessionManyPartitions is the broker's share of issue 18's
// end-to-end latency row: a consumer's fetch session over a topic of 1 or
// 1,000 partitions, each op one record appended to the next partition and
// one incremental Fetch (min bytes 1) that answers it, encoded as the
// connection would. The difference between the sub-benchmarks is the cost
// per partition per fetch. "wait" appends once the fetch is long-polling
// (the Waiter path); "ready" appends before the fetch. Durable acks are
// off: an fsync per op is not the fetch's cost and was most of its noise.
//
//	go test ./internal/protocol -run '^$' -bench FetchSessionManyPartitions -benchmem
func BenchmarkFetchSessionManyPartitions(b *testing.B) {
	for _, n := range []int{1, 1000} {
		for _, mode := range []string{"ready", "wait"} {
			b.Run("partitions="+strconv.Itoa(n)+"/"+mode, func(b *testing.B) { benchFetchSession(b, n, mode == "wait") })
		}
	}
}

func benchFetchSession(b *testing.B, n int, wait bool) {
	val := make([]byte, 512)
	srv, parts := newFetchBenchTopic(b, n, val) // every partition holds a record
	appendOne := func(p *broker.Partition) {
		if err := appendValue(p, val, 1); err != nil {
			b.Error(err)
		}
	}
	offsets := make([]int64, n)
	for i := range offsets {
		offsets[i] = 1
	}
	fetch := func(id, epoch int32, named []int) *fetchReply {
		return fetchNamed(b, srv, id, epoch, 500, named, offsets)
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	enc := fetchEncoder{}
	fr := fetch(0, 0, all) // opens the session
	id, epoch := fr.sessionID, int32(1)
	if id == 0 {
		b.Fatal("no session")
	}
	fr.release()
	var named []int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % n
		done := make(chan struct{})
		if wait {
			go func() { // owner: this op; the fetch below waits for it
				defer close(done)
				time.Sleep(200 * time.Microsecond)
				appendOne(parts[k])
			}()
		} else {
			appendOne(parts[k])
			close(done)
		}
		fr := fetch(id, epoch, named)
		<-done
		epoch++
		if fr.errorCode != 0 || fr.bytes == 0 {
			// A wait variant's fetch may answer before the append only if
			// max wait passed: not expected.
			b.Fatalf("fetch %d: error %d, %d bytes", i, fr.errorCode, fr.bytes)
		}
		if _, err := enc.encode(int32(i), fr); err != nil {
			b.Fatal(err)
		}
		enc.buf, enc.holes = enc.buf[:0], enc.holes[:0]
		fr.release()
		offsets[k]++
		named = append(named[:0], k)
	}
}
