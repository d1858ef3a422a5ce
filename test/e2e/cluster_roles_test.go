package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// controllerArgs is the command line of controller-only node id (1-based)
// of a cluster whose voters are the controller ports of ports (Kafka's
// config/kraft/controller.properties layout: only a controller listener).
func controllerArgs(id int, ports []clusterPorts, dir string, extra ...string) []string {
	var voters []string
	for i, p := range ports {
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", i+1, p.controller))
	}
	p := ports[id-1]
	args := []string{"serve", "--node.id", strconv.Itoa(id), "--process.roles", "controller",
		"--listeners", fmt.Sprintf("CONTROLLER://127.0.0.1:%d", p.controller),
		"--controller.listener.names", "CONTROLLER",
		"--controller.quorum.voters", strings.Join(voters, ","),
		"--log.dirs", dir, "--strata.metrics.listener", fmt.Sprintf("127.0.0.1:%d", p.metrics)}
	return append(args, extra...)
}

// TestClusterControllerOnlyNodes: three controller-only nodes
// (process.roles=controller: the metadata store and the controller, no
// Kafka listener, no partitions) and two broker-only nodes, as processes.
// Clients see the two brokers only; topics are placed on them and
// replicated between them; records go through; the active controller is
// a controller-only node, and when it is killed -9 another takes over and
// CreateTopics works again; a controller-only node refuses a client
// listener with Kafka's message. (The combined layout is
// TestClusterExactCommandLines and TestClusterFourNodes.)
func TestClusterControllerOnlyNodes(t *testing.T) {
	base := t.TempDir()
	ports := randomPorts(t, 3)
	kafka := freePorts(t, 2)
	var nodes []*node
	for i := 1; i <= 5; i++ {
		dir := filepath.Join(base, fmt.Sprintf("n%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var args []string
		if i <= 3 {
			args = controllerArgs(i, ports, dir, "--strata.log.format", "json")
		} else {
			args = brokerArgs(i, kafka[i-4], ports, dir, "--strata.log.format", "json")
		}
		nodes = append(nodes, &node{id: int32(i), dir: dir, args: args})
	}
	startNodes(t, nodes...)
	ctx := ctxFor(t, 3*time.Minute)
	for _, n := range nodes[:3] {
		if n.Kafka != "" || n.Controller == "" {
			t.Fatalf("controller-only node %d: kafka %q controller %q", n.id, n.Kafka, n.Controller)
		}
	}
	brokers := []string{nodes[3].Kafka, nodes[4].Kafka}

	adm := kadm.NewClient(newClient(t, kgo.SeedBrokers(brokers...)))
	if r, err := adm.CreateTopic(ctx, 4, 2, nil, "roles"); err != nil || r.Err != nil {
		t.Fatalf("create: %v %v", err, r.Err)
	}
	waitFor(t, ctx, "two brokers listed, partitions led by both", func() error {
		md := metadata(t, ctx, nodes[3].Kafka, "roles")
		per := map[int32]int{}
		for _, p := range md.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				return kerr.ErrorForCode(p.ErrorCode)
			}
			if len(p.Replicas) != 2 || len(p.ISR) != 2 {
				return fmt.Errorf("partition %d replicas %v isr %v", p.Partition, p.Replicas, p.ISR)
			}
			per[p.Leader]++
		}
		if len(md.Brokers) != 2 || per[4] == 0 || per[5] == 0 {
			return fmt.Errorf("brokers %+v, leaders %v", md.Brokers, per)
		}
		return nil
	})
	prod := newClient(t, kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("roles"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 4; p++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("v-%d", p))}).FirstErr(); err != nil {
			t.Fatalf("produce to %d: %v", p, err)
		}
	}
	prod.Close()

	// The active controller is one of the controller-only nodes.
	active := func() (*node, error) {
		var found *node
		for _, n := range nodes[:3] {
			if !n.Alive() {
				continue
			}
			m := scrape(t, ctx, n.Metrics+"/metrics")
			if m["kafka_controller_kafkacontroller_activecontrollercount"] == 1 {
				if found != nil {
					return nil, fmt.Errorf("nodes %d and %d both active", found.id, n.id)
				}
				found = n
			}
		}
		if found == nil {
			return nil, fmt.Errorf("no active controller")
		}
		return found, nil
	}
	var victim *node
	waitFor(t, ctx, "an active controller", func() (err error) { victim, err = active(); return err })
	victim.Kill()
	waitFor(t, ctx, "another active controller", func() error {
		n, err := active()
		if err == nil && n == victim {
			return fmt.Errorf("node %d still active", n.id)
		}
		return err
	})
	waitFor(t, ctx, "CreateTopics after the controller failover", func() error {
		r, err := adm.CreateTopic(ctx, 2, 2, nil, "after")
		if err == nil && r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
			err = r.Err
		}
		return err
	})
	cons := newClient(t, kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("roles"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 4 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		got += fs.NumRecords()
	}

	// Kafka's rule for process.roles=controller.
	bad := controllerArgs(1, ports, filepath.Join(base, "bad"))
	for i, a := range bad {
		if a == "--listeners" {
			bad[i+1] += fmt.Sprintf(",PLAINTEXT://127.0.0.1:%d", freePorts(t, 1)[0])
		}
	}
	if err := os.MkdirAll(filepath.Join(base, "bad"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := tryStartProc(t, filepath.Join(base, "bad"), bad...); err == nil || !strings.Contains(err.Error(), "must only contain KRaft controller listeners") {
		t.Fatalf("controller-only node with a client listener: %v", err)
	}
}
