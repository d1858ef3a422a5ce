package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCrashDuringAdmin SIGKILLs the broker while topics are being created
// and deleted. Every restart must succeed; acknowledged creations and
// deletions hold; any topic that exists is whole (all partitions usable).
func TestCrashDuringAdmin(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	dir := t.TempDir()
	p := startBroker(t, dir)
	ctx := ctxFor(t, 3*time.Minute)
	created := map[string]bool{}  // acknowledged creations
	deleted := map[string]bool{}  // acknowledged deletions
	deleting := map[string]bool{} // deletions sent (maybe applied, maybe not)
	var mu sync.Mutex
	const parts = 4
	for round := 1; round <= crashRounds(); round++ {
		actx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { // owner: this loop; ends when actx is cancelled or the broker dies
			defer close(done)
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.RequestRetries(0))
			if err != nil {
				return
			}
			defer cl.Close()
			adm := newAdminFrom(cl)
			for i := 0; actx.Err() == nil; i++ {
				name := fmt.Sprintf("r%02d-t%03d", round, i)
				res, err := adm.CreateTopic(actx, parts, 1, nil, name)
				if err != nil || res.Err != nil {
					return
				}
				mu.Lock()
				created[name] = true
				mu.Unlock()
				if i%3 == 2 {
					victim := fmt.Sprintf("r%02d-t%03d", round, i-1)
					mu.Lock()
					deleting[victim] = true
					mu.Unlock()
					r, err := adm.DeleteTopics(actx, victim)
					if err != nil || r.Error() != nil {
						return
					}
					mu.Lock()
					deleted[victim] = true
					mu.Unlock()
				}
			}
		}()
		time.Sleep(time.Duration(20+rng.IntN(300)) * time.Millisecond)
		p.Kill()
		cancel()
		<-done
		p = startBroker(t, dir)
		adm := newAdmin(t, p.Kafka)
		md, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatalf("round %d: list topics: %v", round, err)
		}
		mu.Lock()
		for name := range created {
			if deleted[name] {
				if md.Has(name) {
					t.Errorf("round %d: topic %s was deleted (acknowledged) but is back", round, name)
				}
				continue
			}
			if !md.Has(name) && !deleting[name] {
				t.Errorf("round %d: topic %s was created (acknowledged) but is gone", round, name)
			}
		}
		mu.Unlock()
		// Every existing topic is whole: each partition takes and returns a record.
		var rs []*kgo.Record
		var names []string
		for _, td := range md.Sorted() {
			if td.IsInternal || td.Err != nil {
				if td.Err != nil {
					t.Errorf("round %d: topic %s: %v", round, td.Topic, td.Err)
				}
				continue
			}
			if len(td.Partitions) != parts {
				t.Errorf("round %d: topic %s has %d partitions, want %d", round, td.Topic, len(td.Partitions), parts)
			}
			names = append(names, td.Topic)
			for pi := range td.Partitions {
				rs = append(rs, &kgo.Record{Topic: td.Topic, Partition: pi, Value: []byte(fmt.Sprintf("probe-%d", round))})
			}
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Errorf("round %d: produce a probe to every partition of %d topics: %v", round, len(names), err)
		}
		cl.Close()
		t.Logf("round %d: %d topics exist, %d creations and %d deletions acknowledged so far", round, len(names), len(created), len(deleted))
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
}
