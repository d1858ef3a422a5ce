package storage

import (
	"fmt"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// BenchmarkWaiterRound: a long poll's Waiter on 1,000 logs (a consumer's
// fetch session, issue 18) while each op appends to 100 of them in one
// group-commit round; the op ends when the waiter has seen all 100.
// wakeups/op is how many times the poll woke for one round: each wake-up
// beyond the first is one more Fetch answer before the consumer has the
// round's records (on the wire: a fetch round trip over every partition of
// the session).
//
//	go test ./internal/storage -run '^$' -bench WaiterRound -benchtime 200x
func BenchmarkWaiterRound(b *testing.B) {
	const n, per = 1000, 100
	fsys := vfs.NewCrashFS()
	s := NewSyncer(quiet)
	defer s.Close()
	cfg := testConfig()
	cfg.Durable = true
	cfg.SegmentBytes = 64 << 20
	w := NewWaiter()
	logs := make([]*Log, n)
	for i := range logs {
		l, err := Open(fmt.Sprintf("/d/b-%d", i), [16]byte{1}, cfg, false, Options{FS: fsys, Syncer: s, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		mustAppend(b, l, mkBatch(b, 1, "a", 1))
		l.AddWaiter(w, i)
		logs[i] = l
	}
	w.Take(nil)
	select {
	case <-w.C():
	default:
	}
	seen := make([]bool, n)
	var wakes int
	var tags []int
	b.ResetTimer()
	for op := 0; op < b.N; op++ {
		s.roundMu.Lock()
		for j := range per {
			if _, err := logs[(op*per+j)%n].Append(mkBatch(b, 2, "b", 1), AppendOptions{LeaderEpoch: 1}); err != nil {
				s.roundMu.Unlock()
				b.Fatal(err)
			}
		}
		s.roundMu.Unlock()
		clear(seen)
		for got := 0; got < per; {
			<-w.C()
			wakes++
			tags = w.Take(tags[:0])
			for _, t := range tags {
				if !seen[t] {
					seen[t] = true
					got++
				}
			}
		}
	}
	b.ReportMetric(float64(wakes)/float64(b.N), "wakeups/op")
}
