package controller

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/meta"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster benchmarks of issue 11 at the metadata layer, against a
// real embedded etcd member (fsync on): 10,000 partitions on 3 brokers.
//
//	go test ./internal/controller -run '^$' -bench Cluster -benchtime 3x

const benchPartitions = 10_000

// benchCluster registers three brokers and creates one topic of n
// partitions (RF 1); it returns the store, cache and sessions.
func benchCluster(b *testing.B, n int) (*meta.Store, *meta.Cache, map[int32]*meta.Session, time.Duration) {
	st, cache := startStore(b)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	sessions := map[int32]*meta.Session{}
	for id := int32(1); id <= 3; id++ {
		s, err := meta.NewSession(ctx, st.Client(), 10*time.Second, time.Second, quiet)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close(context.Background()) })
		if _, err := st.Register(ctx, meta.Broker{ID: id, DirectoryID: fmt.Sprint(id)}, s.Lease()); err != nil {
			b.Fatal(err)
		}
		sessions[id] = s
	}
	if _, err := cache.WaitRev(ctx, 0); err != nil {
		b.Fatal(err)
	}
	for len(cache.View().Brokers) < 3 {
		<-cache.Changed()
	}
	admin := &Admin{Store: st, Cache: cache, Policy: func(*meta.Topic) Policy { return Policy{MinISR: 1} }, MaxReplicationFactor: 1}
	began := time.Now()
	if err := admin.CreateTopic(ctx, TopicRequest{Name: "big", ID: "big-id", Partitions: n, RF: 1}, false); err != nil {
		b.Fatal(err)
	}
	return st, cache, sessions, time.Since(began)
}

// BenchmarkClusterCreateTopic10k: CreateTopics of 10,000 partitions
// across 3 brokers, until the creating broker's cache shows them.
func BenchmarkClusterCreateTopic10k(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		_, _, _, took := benchCluster(b, benchPartitions)
		total += took
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/create")
}

// BenchmarkClusterLoad10k: a broker's start-up read of the metadata
// (Store.Load, the cache's first view) with 10,000 partitions, and the
// view's heap per partition.
func BenchmarkClusterLoad10k(b *testing.B) {
	st, _, _, _ := benchCluster(b, benchPartitions)
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v, err := st.Load(ctx)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPartition := float64(after.HeapAlloc-before.HeapAlloc) / float64(v.PartitionCount())
	runtime.KeepAlive(v)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := st.Load(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(perPartition, "heapB/partition")
}

// BenchmarkClusterFailover10k: the controller's reaction to a broker
// leaving with a third of 10,000 partitions: from the registration's
// deletion to the cache showing every one of them changed (leader -1:
// RF 1), i.e. reconcile + batched CAS transactions + watch.
func BenchmarkClusterFailover10k(b *testing.B) {
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		st, cache, sessions, _ := benchCluster(b, benchPartitions)
		ctx, cancel := context.WithCancel(context.Background())
		d := &Driver{NodeID: 1, Store: st, Cache: cache, Policy: func(*meta.Topic) Policy { return Policy{MinISR: 1} },
			SessionTTL: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}
		done := make(chan struct{})
		go func() { d.Run(ctx); close(done) }()
		for cache.View().Controller != 1 {
			<-cache.Changed()
		}
		b.StartTimer()
		began := time.Now()
		if err := sessions[2].Close(ctx); err != nil {
			b.Fatal(err)
		}
		for {
			ch := cache.Changed()
			v := cache.View()
			if !v.Live(2) && v.OfflinePartitions() >= benchPartitions/3 {
				break
			}
			<-ch
		}
		total += time.Since(began)
		b.StopTimer()
		cancel()
		<-done
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/failover")
}

// BenchmarkMetadataView10k: building a full Metadata answer's data from
// the cache's view (every topic and partition, with offline replicas),
// what a broker does per Metadata request.
func BenchmarkMetadataView10k(b *testing.B) {
	_, cache, _, _ := benchCluster(b, benchPartitions)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := cache.View()
		n := 0
		for _, name := range v.TopicNames() {
			t := v.Topics[name]
			for _, p := range v.Parts[t.ID] {
				n += len(p.State.OfflineReplicas(v.Live)) + len(p.State.ISR)
			}
		}
		if n == 0 {
			b.Fatal("empty view")
		}
	}
}

// BenchmarkMetadataResponse10k: building and encoding a Metadata v12
// response for every one of 10,000 partitions from the cached view: the
// issue's "Metadata for 10,000 partitions" figure, less the network.
func BenchmarkMetadataResponse10k(b *testing.B) {
	_, cache, _, _ := benchCluster(b, benchPartitions)
	var buf []byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := cache.View()
		resp := kmsg.NewPtrMetadataResponse()
		resp.Version = 12
		for _, id := range v.BrokerIDs() {
			br := kmsg.NewMetadataResponseBroker()
			br.NodeID, br.Host, br.Port = id, "127.0.0.1", 9092
			resp.Brokers = append(resp.Brokers, br)
		}
		resp.ControllerID = v.Controller
		for _, name := range v.TopicNames() {
			t := v.Topics[name]
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = kmsg.StringPtr(name)
			for _, p := range v.Parts[t.ID] {
				mp := kmsg.NewMetadataResponseTopicPartition()
				mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.State.Leader, p.State.LeaderEpoch
				mp.Replicas, mp.ISR = p.State.Replicas, p.State.ISR
				mp.OfflineReplicas = p.State.OfflineReplicas(v.Live)
				mt.Partitions = append(mt.Partitions, mp)
			}
			resp.Topics = append(resp.Topics, mt)
		}
		buf = resp.AppendTo(buf[:0])
	}
	b.ReportMetric(float64(len(buf)), "bytes/response")
}
