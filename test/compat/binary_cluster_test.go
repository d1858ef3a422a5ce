package compat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/faults"
	"github.com/strata-io/strata/internal/freeport"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// strataBinary is the `strata` binary the process tests run:
// STRATA_E2E_BIN, or one built from this checkout once per test process.
func strataBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("STRATA_E2E_BIN"); bin != "" {
		return bin
	}
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strata-compat-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		_, here, _, _ := runtime.Caller(0)
		binaryPath = filepath.Join(dir, "strata")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		binaryErr = faults.BuildStrata(ctx, filepath.Join(filepath.Dir(here), "..", ".."), binaryPath)
	})
	if binaryErr != nil {
		t.Fatalf("build strata: %v", binaryErr)
	}
	return binaryPath
}

// startBinaryCluster starts three `strata serve` processes forming one
// cluster: nodes 1 and 2 combined (broker and controller: the metadata
// store's voters), node 3 broker-only (process.roles=broker), topics
// replicated three times by default with min.insync.replicas=2. It returns
// the broker-only node's Kafka address once DescribeCluster through it
// lists all three brokers.
func startBinaryCluster(t *testing.T, ctx context.Context, bin string) string {
	t.Helper()
	base := t.TempDir()
	kafkaAddrs := []string{freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)}
	ctls := []string{freeport.Addr(t), freeport.Addr(t)}
	voters := fmt.Sprintf("1@%s,2@%s", ctls[0], ctls[1])
	common := []string{
		"--controller.listener.names", "CONTROLLER",
		"--controller.quorum.voters", voters,
		"--default.replication.factor", "3",
		"--min.insync.replicas", "2",
		"--group.initial.rebalance.delay.ms", "0",
		"--strata.metrics.listener", "127.0.0.1:0",
		"--strata.log.format", "json",
	}
	var procs []*faults.Proc
	for i := range 3 {
		dir := filepath.Join(base, fmt.Sprintf("node-%d", i+1))
		args := []string{"serve", "--node.id", fmt.Sprint(i + 1), "--log.dirs", dir}
		if i < 2 {
			args = append(args, "--process.roles", "broker,controller",
				"--listeners", fmt.Sprintf("PLAINTEXT://%s,CONTROLLER://%s", kafkaAddrs[i], ctls[i]))
		} else {
			args = append(args, "--process.roles", "broker", "--listeners", "PLAINTEXT://"+kafkaAddrs[i])
		}
		procs = append(procs, faults.NewProc(faults.ProcSpec{Name: fmt.Sprintf("node-%d", i+1), Path: bin,
			Args: append(args, common...), Dir: base, Ready: faults.StrataReady, LogPath: dir + ".log"}))
	}
	t.Cleanup(func() {
		for i, p := range procs {
			p.Stop()
			if t.Failed() {
				t.Logf("node-%d log: %s", i+1, filepath.Join(base, fmt.Sprintf("node-%d.log", i+1)))
			}
		}
	})
	// The controllers wait for each other (a quorum) before serving.
	errs := make(chan error, len(procs))
	for _, p := range procs {
		go func() { errs <- p.Start(ctx) }() // owner: this call, which reads every result
	}
	for range procs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	boot := kafkaAddrs[2]
	adm := bootAdmin(t, boot)
	waitFor(t, "three brokers registered", 90*time.Second, func() error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		bs, err := adm.ListBrokers(qctx)
		if err != nil {
			return err
		}
		if len(bs) != 3 {
			return fmt.Errorf("brokers %v", bs.NodeIDs())
		}
		return nil
	})
	return boot
}

// bootAdmin is a franz-go admin client seeded with boot only.
func bootAdmin(t *testing.T, boot string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(boot))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// TestBinaryClusterClients: every driver (sarama, kafka-go, kcat,
// confluent-kafka-python, kafka-python, kafkajs) against three processes
// of the built binary, two combined nodes and one broker-only node, each
// client given only the broker-only node's address. Per client: admin
// (create a three-partition topic with replication factor 3 through its
// own CreateTopics where it has one, list, describe its configs), produce
// to every partition (Metadata through the broker-only node leads the
// client to each partition's leader), read a partition back, consume the
// whole topic in a group and commit (the committed offsets checked with
// kadm), an idempotent produce where the client has one, and delete the
// topic where it can. kafka-go's and kcat's admin gaps are filled with
// kadm (kcat has no admin API).
func TestBinaryClusterClients(t *testing.T) {
	if targetKfake() {
		t.Skip("kfake is one broker, not the binary")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel) // after the parallel subtests
	boot := startBinaryCluster(t, ctx, strataBinary(t))
	adm := bootAdmin(t, boot)
	clients := []*Client{saramaClient(), kafkaGoClient(), kcatClient(t), confluentClient(t), kafkaPythonClient(t), kafkaJSClient(t)}
	for _, cl := range clients {
		t.Run(cl.Name, func(t *testing.T) {
			t.Parallel()
			binaryClusterChecks(t, ctx, adm, boot, cl)
		})
	}
}

func binaryClusterChecks(t *testing.T, ctx context.Context, adm *kadm.Client, boot string, cl *Client) {
	const partitions, perPart = 3, 5
	topic, group := "rf3-"+cl.Name, "rf3-group-"+cl.Name
	// Admin.
	if cl.can(opCreate) {
		cl.Must(t, boot, Op{Op: opCreate, Topic: topic, Partitions: partitions, ReplicationFactor: 3})
	} else if r, err := adm.CreateTopic(ctx, partitions, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("kadm create %s: %v %v", topic, err, r.Err)
	}
	waitFor(t, topic+": three replicas in sync on every partition", 90*time.Second, func() error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		md, err := adm.Metadata(qctx, topic)
		if err != nil {
			return err
		}
		ps := md.Topics[topic].Partitions
		if len(ps) != partitions {
			return fmt.Errorf("%d partitions", len(ps))
		}
		for _, p := range ps {
			if p.Err != nil || p.Leader < 0 || len(p.Replicas) != 3 || len(p.ISR) != 3 {
				return fmt.Errorf("partition %d: leader %d replicas %v isr %v err %v", p.Partition, p.Leader, p.Replicas, p.ISR, p.Err)
			}
		}
		return nil
	})
	if cl.can(opList) {
		if r := cl.Must(t, boot, Op{Op: opList}); !slices.Contains(r.Topics, topic) {
			t.Errorf("list_topics: %v lacks %s", r.Topics, topic)
		}
	}
	if cl.can(opDescribe) {
		r := cl.Must(t, boot, Op{Op: opDescribe, Topic: topic})
		if got := r.Configs["min.insync.replicas"]; got != "2" {
			t.Errorf("describe_configs: min.insync.replicas %q, want 2 (the cluster's setting)", got)
		}
	}
	// Produce to every partition through its leader; read one back.
	var want []string
	for p := int32(0); p < partitions; p++ {
		var recs []Rec
		for i := 0; i < perPart; i++ {
			k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("%s-p%d-%d", cl.Name, p, i)
			recs = append(recs, Rec{Key: &k, Value: &v, Partition: p})
			want = append(want, v)
		}
		cl.Must(t, boot, Op{Op: opProduce, Topic: topic, Partition: p, Records: recs})
	}
	got := cl.Must(t, boot, Op{Op: opFetch, Topic: topic, Partition: 1, Offset: -2, Max: perPart}).Records
	if len(got) != perPart {
		t.Fatalf("fetch partition 1: %d records, want %d: %v", len(got), perPart, got)
	}
	for i, r := range got {
		if r.Value == nil || *r.Value != fmt.Sprintf("%s-p1-%d", cl.Name, i) || r.Offset != int64(i) {
			t.Fatalf("fetch partition 1 record %d: %v", i, r)
		}
	}
	// A group reads the whole topic and commits.
	if !cl.can(opGroupConsume) {
		t.Fatalf("%s has no group_consume", cl.Name)
	}
	gr := cl.Must(t, boot, Op{Op: opGroupConsume, Topic: topic, Group: group, Max: partitions * perPart})
	var read []string
	for _, r := range gr.Records {
		if r.Value != nil && !slices.Contains(read, *r.Value) {
			read = append(read, *r.Value)
		}
	}
	slices.Sort(read)
	slices.Sort(want)
	if !slices.Equal(read, want) {
		t.Fatalf("group consume read %v, want %v", read, want)
	}
	waitFor(t, group+" committed at the end of every partition", 60*time.Second, func() error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		offs, err := adm.FetchOffsets(qctx, group)
		if err != nil {
			return err
		}
		var bad []string
		for p := int32(0); p < partitions; p++ {
			o, ok := offs.Lookup(topic, p)
			if !ok || o.Err != nil || o.At != perPart {
				bad = append(bad, fmt.Sprintf("p%d=%v", p, o))
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("committed %s", strings.Join(bad, " "))
		}
		return nil
	})
	// An idempotent producer (InitProducerId through the broker-only node).
	if cl.can(opIdempotent) {
		v := cl.Name + "-idempotent"
		cl.Must(t, boot, Op{Op: opProduce, Topic: topic, Partition: 2, Idempotent: true, Records: []Rec{{Value: &v, Partition: 2}}})
		r := cl.Must(t, boot, Op{Op: opFetch, Topic: topic, Partition: 2, Offset: perPart, Max: 1})
		if len(r.Records) != 1 || r.Records[0].Value == nil || *r.Records[0].Value != v {
			t.Fatalf("idempotent record read back as %v", r.Records)
		}
	}
	// Delete the topic (answered once no broker serves it).
	if cl.can(opDeleteTopic) {
		cl.Must(t, boot, Op{Op: opDeleteTopic, Topic: topic})
		waitFor(t, topic+" deleted", 60*time.Second, func() error {
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			td, err := adm.ListTopics(qctx)
			if err != nil {
				return err
			}
			if td.Has(topic) {
				return fmt.Errorf("still listed")
			}
			return nil
		})
	}
}
