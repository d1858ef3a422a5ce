package compat

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/servertest"
)

// followerReads reads strata_fetch_follower_reads_total from broker b's
// /metrics: consumer fetches it served as a follower (KIP-392).
func followerReads(t *testing.T, b *servertest.Broker) float64 {
	t.Helper()
	resp, err := http.Get("http://" + b.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^strata_fetch_follower_reads_total (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatal("strata_fetch_follower_reads_total not exported")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestKcatClientRack: librdkafka's follower fetching (KIP-392,
// client.rack) against three brokers in racks a, b and c with Kafka's
// RackAwareReplicaSelector: kcat -X client.rack=b, bootstrapped from the
// leader (rack a), is sent to the follower of rack b by the leader's
// preferred_read_replica and reads every record; the follower of rack b
// counts the consumer fetches it served, the follower of rack c none.
func TestKcatClientRack(t *testing.T) {
	if targetKfake() {
		t.Skip("kfake is one broker")
	}
	kcat := requireTool(t, "kcat", "-V")
	racks := []string{"a", "b", "c"}
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3, Metrics: true,
		Settings: map[string]string{"replica.selector.class": config.RackAwareReplicaSelector},
		Logger:   servertest.TestLogger(t, slog.LevelWarn),
		Configure: func(i int, cfg *config.Broker) error {
			return cfg.Set("broker.rack", racks[i])
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // whole-test bound
	defer cancel()
	cl := c.Brokers[0].Client()
	adm := kadm.NewClient(cl)
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "racked", -1, -1
	ct.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2, 3}}}
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 30000
	resp, err := create.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(code))
	}
	waitFor(t, "replicas 1,2,3 in sync, led by 1", 90*time.Second, func() error {
		md, err := adm.Metadata(ctx, "racked")
		if err != nil {
			return err
		}
		p := md.Topics["racked"].Partitions[0]
		if p.Leader != 1 || len(p.ISR) != 3 || len(p.Replicas) != 3 {
			return fmt.Errorf("leader %d replicas %v isr %v", p.Leader, p.Replicas, p.ISR)
		}
		return nil
	})
	prod := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("racked"))
	defer prod.Close()
	const n = 50
	for i := range n {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	beforeB, beforeC := followerReads(t, c.Brokers[1]), followerReads(t, c.Brokers[2])
	// -c n without -e: kcat reads until it has n records (a follower's
	// high watermark may trail the leader's by a fetch round).
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", c.Brokers[0].Addr(), "-t", "racked", "-p", "0",
		"-o", "beginning", "-c", strconv.Itoa(n), "-f", "%s\n", "-X", "client.rack=b", "-q")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	if len(got) != n {
		t.Fatalf("kcat read %d records, want %d:\n%s", len(got), n, out)
	}
	for i, v := range got {
		if v != fmt.Sprint(i) {
			t.Fatalf("record %d is %q", i, v)
		}
	}
	afterB, afterC := followerReads(t, c.Brokers[1]), followerReads(t, c.Brokers[2])
	if afterB <= beforeB {
		t.Fatalf("the follower in rack b served no consumer fetch (%v -> %v)", beforeB, afterB)
	}
	if afterC != beforeC {
		t.Fatalf("the follower in rack c served consumer fetches (%v -> %v)", beforeC, afterC)
	}
	t.Logf("follower fetches served in rack b: %v", afterB-beforeB)
}
