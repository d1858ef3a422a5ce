package group_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// offsetsTopicSize sums the bytes of the __consumer_offsets segment (.log)
// files, as DescribeLogDirs reports a partition's size (index files are
// preallocated to segment.index.bytes and would swamp the figure).
func offsetsTopicSize(t testing.TB, dir string) int64 {
	var total int64
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "__consumer_offsets-") {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // being swapped
		}
		for _, f := range files {
			if !strings.HasSuffix(f.Name(), ".log") {
				continue
			}
			if fi, err := f.Info(); err == nil {
				total += fi.Size()
			}
		}
	}
	return total
}

// TestSoakConsumerOffsets (STRATA_LONG=1) makes 1,000,000 offset commits
// for 100 groups (one partition offset per OffsetCommit request) and checks
// that the cleaner keeps __consumer_offsets bounded and that restart time
// stays flat. Figures are logged.
func TestSoakConsumerOffsets(t *testing.T) {
	if os.Getenv("STRATA_LONG") == "" {
		t.Skip("set STRATA_LONG=1 to run the __consumer_offsets soak")
	}
	const (
		groups     = 100
		partitions = 10
		total      = 1_000_000
	)
	b := startBroker(t, map[string]string{
		"offsets.topic.num.partitions": "50",
		"log.cleaner.backoff.ms":       "500",
	})
	b.createTopic("t", partitions, 0)
	ctx := ctxFor(t, 60*time.Minute)
	segBytes := "65536"
	acr, err := b.Admin().AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: &segBytes}}, "__consumer_offsets")
	if err != nil || acr[0].Err != nil {
		t.Fatalf("set segment.bytes of __consumer_offsets: %v %v", err, acr)
	}

	var maxSize atomic.Int64
	sample := func(stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		for {
			if s := offsetsTopicSize(t, b.Dir); s > maxSize.Load() {
				maxSize.Store(s)
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}

	// Per group: next commit number. Commit i of group g stores offset i at
	// partition i%partitions.
	next := make([]int64, groups)
	commitUpTo := func(upTo int64) time.Duration {
		clients := make([]*kgo.Client, 4)
		for i := range clients {
			clients[i] = b.Client()
		}
		stop, done := make(chan struct{}), make(chan struct{})
		go sample(stop, done)
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, groups)
		for g := 0; g < groups; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				cl := clients[g%len(clients)]
				group := fmt.Sprintf("soak-%03d", g)
				for ; next[g] < upTo/groups; next[g]++ {
					i := next[g]
					req := kmsg.NewPtrOffsetCommitRequest()
					req.Version = 8
					req.Group, req.Generation = group, -1
					rt := kmsg.NewOffsetCommitRequestTopic()
					rt.Topic = "t"
					rp := kmsg.NewOffsetCommitRequestTopicPartition()
					rp.Partition, rp.Offset = int32(i%partitions), i
					rt.Partitions = append(rt.Partitions, rp)
					req.Topics = append(req.Topics, rt)
					resp, err := req.RequestWith(ctx, cl)
					if err == nil {
						err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
					}
					if err != nil {
						errs <- fmt.Errorf("commit %d of %s: %w", i, group, err)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		took := time.Since(start)
		close(stop)
		<-done
		for _, cl := range clients {
			cl.Close()
		}
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		return took
	}
	verify := func() {
		adm := b.Admin()
		for _, g := range []int{0, 37, 99} {
			group := fmt.Sprintf("soak-%03d", g)
			os, err := adm.FetchOffsets(ctxFor(t, 30*time.Second), group)
			if err != nil {
				t.Fatal(err)
			}
			for p := int32(0); p < partitions; p++ {
				// The last commit to partition p was the largest i < next with i%partitions == p.
				last := next[g] - 1
				for last%partitions != int64(p) {
					last--
				}
				if o, _ := os.Lookup("t", p); o.At != last {
					t.Fatalf("%s partition %d at %d, want %d", group, p, o.At, last)
				}
			}
		}
	}

	t.Logf("%-10s %-10s %-12s %-14s %-14s %-10s", "commits", "commits/s", "size(live)", "max size seen", "size restart", "restart")
	for _, upTo := range []int64{100_000, 400_000, 700_000, total} {
		before := sum(next)
		took := commitUpTo(upTo)
		rate := float64(sum(next)-before) / took.Seconds()
		// Give the cleaner a round, then restart and replay.
		time.Sleep(2 * time.Second)
		live := offsetsTopicSize(t, b.Dir)
		b.Restart()
		verify()
		t.Logf("%-10d %-10.0f %-12d %-14d %-14d %-10s", sum(next), rate, live, maxSize.Load(), offsetsTopicSize(t, b.Dir), b.StartTook().Round(time.Millisecond))
	}
	if m := maxSize.Load(); m > 32<<20 {
		t.Fatalf("__consumer_offsets grew to %d bytes: the cleaner does not keep it bounded", m)
	}
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
