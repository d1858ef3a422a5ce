package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

// BenchmarkFirstDurableAppend is a partition's first acknowledged record
// against a later one: an acks=all append of one 512 B record and its
// fsync, each op on the next partition of a topic of 100 (the way a
// producer spread over many partitions moves from one to the next, issue
// 18's end-to-end row). "new" partitions were created by CreateTopics and
// never written, so the first round fsyncs partition.metadata, the leader
// epoch checkpoint and the directory too; "written" ones hold a record
// already. Run it on the file system that matters (TMPDIR): a journaled
// ext4 makes each fsync a journal commit.
//
//	go test ./internal/broker -run '^$' -bench FirstDurableAppend -benchtime 300x
func BenchmarkFirstDurableAppend(b *testing.B) {
	const parts = 100
	val := make([]byte, 512)
	batch := func() []byte {
		h := recordtest.NoProducer
		h.BaseTimestamp = time.Now().UnixMilli()
		return recordtest.Batch(h, record.Record{Value: val})
	}
	for _, written := range []bool{false, true} {
		name := "new"
		if written {
			name = "written"
		}
		b.Run(name, func(b *testing.B) {
			br := openTestB(b, b.TempDir())
			defer br.Close()
			var ps []*Partition
			topics := 0
			next := func() {
				t, err := br.CreateTopic(CreateTopicRequest{Name: fmt.Sprintf("t%d", topics), NumPartitions: parts, ReplicationFactor: 1})
				if err != nil {
					b.Fatal(err)
				}
				topics++
				ps = t.Partitions
				if written {
					for _, p := range ps {
						if _, err := p.Append(context.Background(), batch(), -1); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			next()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%parts == 0 {
					b.StopTimer()
					next()
					b.StartTimer()
				}
				if _, err := ps[i%parts].Append(context.Background(), batch(), -1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
