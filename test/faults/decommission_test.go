package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDecommissionUnderLoad: `strata cluster decommission 3` against three
// built binaries moves every replica off broker 3 with
// AlterPartitionReassignments (KIP-455) while an idempotent acks=all
// producer writes to the topic (3 partitions, replication factor 2,
// min.insync.replicas=2); broker 3 is then stopped (SIGTERM). Every
// acknowledged record is read back from brokers 1 and 2, once and in order
// per partition. The stopped broker's registration lapsed with its session,
// so UnregisterBroker (64) answers BROKER_ID_NOT_REGISTERED (Kafka's code
// for a broker the controller holds no registration of).
func TestDecommissionUnderLoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // whole-test bound
	defer cancel()
	procs, addrs := replicatedCluster(t, ctx)
	adm := kadm.NewClient(mustClient(t, kgo.SeedBrokers(addrs...)))
	const topic, parts = "decom", 3
	if r, err := adm.CreateTopic(ctx, parts, 2, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	waitUntil(t, ctx, "every partition has an ISR of two", func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Err != nil || len(p.ISR) != 2 {
				return fmt.Errorf("partition %d: isr %v %v", p.Partition, p.ISR, p.Err)
			}
		}
		return nil
	})

	prod := mustClient(t, kgo.SeedBrokers(addrs...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1_000_000), kgo.RecordDeliveryTimeout(2*time.Minute))
	var (
		mu    sync.Mutex
		acked [parts][]string
		perr  error
	)
	pctx, stopProd := context.WithCancel(ctx)
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := 0; pctx.Err() == nil; i++ {
			p := int32(i % parts)
			v := fmt.Sprintf("%d-%d", p, i)
			err := prod.ProduceSync(pctx, &kgo.Record{Partition: p, Value: []byte(v)}).FirstErr()
			mu.Lock()
			if err == nil {
				acked[p] = append(acked[p], v)
			} else if pctx.Err() == nil {
				perr = err
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range acked {
			n += len(a)
		}
		return n
	}
	waitUntil(t, ctx, "records acknowledged before the decommission", func() error {
		if n := total(); n < 300 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})

	cctx, ccancel := context.WithTimeout(ctx, 4*time.Minute)
	out, err := exec.CommandContext(cctx, strataBin, "cluster", "decommission", "3", "--brokers", strings.Join(addrs, ","),
		"--timeout", "4m", "-o", "json").Output()
	ccancel()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("decommission: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("decommission: %v", err)
	}
	var res struct {
		Moves []struct{ To []int32 } `json:"moves"`
		Done  bool                   `json:"done"`
	}
	if err := json.Unmarshal(out, &res); err != nil || !res.Done || len(res.Moves) == 0 {
		t.Fatalf("decommission output %s: %v", out, err)
	}
	t.Logf("decommission moved %d partitions", len(res.Moves))
	// Every broker applies the metadata on its own: wait for the one asked.
	waitUntil(t, ctx, "no replica on broker 3", func() error {
		md, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		for _, p := range md.Topics[topic].Partitions {
			if slices.Contains(p.Replicas, 3) || slices.Contains(p.ISR, 3) {
				return fmt.Errorf("partition %d still on broker 3: replicas %v isr %v", p.Partition, p.Replicas, p.ISR)
			}
		}
		return nil
	})
	before := total()
	waitUntil(t, ctx, "records acknowledged after the moves", func() error {
		if n := total(); n < before+150 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	if err := procs[2].Term(ctx); err != nil {
		t.Fatalf("stop broker 3: %v", err)
	}
	before = total()
	waitUntil(t, ctx, "records acknowledged with broker 3 stopped", func() error {
		if n := total(); n < before+150 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	stopProd()
	<-prodDone
	mu.Lock()
	if perr != nil {
		mu.Unlock()
		t.Fatalf("produce failed: %v", perr)
	}
	want := acked
	mu.Unlock()

	survivors := addrs[:2]
	unreg := kmsg.NewPtrUnregisterBrokerRequest()
	unreg.BrokerID = 3
	waitUntil(t, ctx, "broker 3's registration lapsed", func() error {
		resp, err := unreg.RequestWith(ctx, mustClient(t, kgo.SeedBrokers(survivors...)))
		if err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); !errors.Is(err, kerr.BrokerIDNotRegistered) {
			return fmt.Errorf("UnregisterBroker(3): %v", err)
		}
		return nil
	})

	// Every acknowledged record, once and in order, from brokers 1 and 2.
	for p := int32(0); p < parts; p++ {
		cons := mustClient(t, kgo.SeedBrokers(survivors...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
		var got []string
		waitUntil(t, ctx, fmt.Sprintf("partition %d read back", p), func() error {
			fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
			defer fcancel()
			fs := cons.PollFetches(fctx)
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			if len(got) < len(want[p]) {
				return fmt.Errorf("%d of %d", len(got), len(want[p]))
			}
			return nil
		})
		// Records acknowledged are read back once, in order; records sent
		// but not acknowledged (the producer stopped mid-send) may follow.
		if !slices.Equal(got[:len(want[p])], want[p]) {
			t.Fatalf("partition %d: read %d records, acknowledged %d; they differ", p, len(got), len(want[p]))
		}
	}
	t.Logf("acknowledged and read back: %d records", before)
}

func mustClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}
