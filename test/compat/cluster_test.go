package compat

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/servertest"
)

// TestClusterClients: every driver against a cluster of three combined
// nodes (in-process brokers, one metadata store), bootstrapped from node 1
// only. Each creates a topic of three partitions (with its own admin API
// where it has one), led by several brokers, produces to each partition
// and reads each back: the client finds every partition's leader from
// Metadata and talks to it (a broker that does not lead a partition would
// answer NOT_LEADER_OR_FOLLOWER).
func TestClusterClients(t *testing.T) {
	if targetKfake() {
		t.Skip("kfake is one broker")
	}
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3,
		Settings: map[string]string{"group.initial.rebalance.delay.ms": "0"},
		Logger:   servertest.TestLogger(t, slog.LevelWarn)})
	boot := c.Brokers[0].Addr()
	adm := kadm.NewClient(c.Brokers[0].Client())
	clients := []func(*testing.T) *Client{
		func(*testing.T) *Client { return saramaClient() },
		func(*testing.T) *Client { return kafkaGoClient() },
		kcatClient, confluentClient, kafkaPythonClient, kafkaJSClient,
	}
	for _, mk := range clients {
		cl := mk(t)
		t.Run(cl.Name, func(t *testing.T) {
			topic := "spread-" + cl.Name
			if cl.can(opCreate) {
				cl.Must(t, boot, Op{Op: opCreate, Topic: topic, Partitions: 3})
			} else if r, err := adm.CreateTopic(t.Context(), 3, 1, nil, topic); err != nil || r.Err != nil {
				t.Fatalf("create %s: %v %v", topic, err, r.Err)
			}
			// Placement balances leaders over every topic (the internal
			// ones too), so three partitions are led by at least two
			// brokers, not always by all three.
			waitFor(t, "leaders on several brokers", 20*time.Second, func() error {
				md, err := adm.Metadata(t.Context(), topic)
				if err != nil {
					return err
				}
				leaders := map[int32]bool{}
				for _, p := range md.Topics[topic].Partitions {
					if p.Err != nil {
						return p.Err
					}
					leaders[p.Leader] = true
				}
				if len(leaders) < 2 {
					return fmt.Errorf("leaders %v", leaders)
				}
				return nil
			})
			for p := int32(0); p < 3; p++ {
				var recs []Rec
				for i := 0; i < 5; i++ {
					k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("%s-p%d-%d", cl.Name, p, i)
					recs = append(recs, Rec{Key: &k, Value: &v, Partition: p})
				}
				cl.Must(t, boot, Op{Op: opProduce, Topic: topic, Partition: p, Records: recs})
				got := cl.Must(t, boot, Op{Op: opFetch, Topic: topic, Partition: p, Offset: -2, Max: 5}).Records
				if len(got) != 5 {
					t.Fatalf("partition %d: read %d records, want 5: %v", p, len(got), got)
				}
				for i, r := range got {
					if r.Value == nil || *r.Value != *recs[i].Value || r.Offset != int64(i) {
						t.Fatalf("partition %d record %d: %v, want %s at offset %d", p, i, r, *recs[i].Value, i)
					}
				}
			}
			// And a franz-go client on the same topic sees them all.
			kc := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			n := 0
			for n < 15 {
				fs := kc.PollFetches(t.Context())
				if t.Context().Err() != nil {
					t.Fatal(t.Context().Err())
				}
				n += fs.NumRecords()
			}
		})
	}
}
