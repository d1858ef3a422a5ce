package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/server"
	"github.com/strata-io/strata/internal/servertest"
)

// TestClusterStatusCLI: `strata cluster status` against a combined node
// started with Kafka's KRaft settings reads the metadata store through
// the controller listener.
func TestClusterStatusCLI(t *testing.T) {
	bin := buildStrata(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	b := servertest.Start(t, servertest.Options{Settings: map[string]string{
		"node.id": "3", "process.roles": "broker,controller", "broker.rack": "r1",
		"listeners":                 fmt.Sprintf("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", port),
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  fmt.Sprintf("3@127.0.0.1:%d", port),
	}})
	ctl := fmt.Sprintf("--bootstrap-controller=127.0.0.1:%d", port)
	out := ok(t, bin, "", "cluster", "status", ctl, "-o", "json")
	var st clusterStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if len(st.Brokers) != 1 || st.Brokers[0].ID != 3 || st.Brokers[0].Rack != "r1" || st.Brokers[0].Epoch <= 0 ||
		st.Controller != 3 || len(st.Controllers) != 1 || st.Controllers[0].ID != 3 || st.ClusterID == "" {
		t.Errorf("status %+v", st)
	}
	if !strings.Contains(strings.Join(st.Brokers[0].Listeners, ","), "PLAINTEXT://127.0.0.1:") {
		t.Errorf("listeners %v (broker at %s)", st.Brokers[0].Listeners, b.Addr())
	}
	out = ok(t, bin, "", "cluster", "status", ctl)
	if !strings.Contains(out, "BROKER  RACK  EPOCH") || !strings.Contains(out, "active controller 3") || !strings.Contains(out, "0 under-replicated") {
		t.Errorf("table:\n%s", out)
	}
}

// TestClusterStatusUnhealthyPartitions: `strata cluster status` of three
// combined nodes with one stopped lists the replicated partition whose
// ISR lost the stopped broker as under-replicated and the partition whose
// only replica was on it as offline (and under-replicated: its ISR is
// empty, below its one replica, as kafka-topics.sh
// --under-replicated-partitions counts it), in JSON and in the table.
func TestClusterStatusUnhealthyPartitions(t *testing.T) {
	bin := buildStrata(t)
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3})
	adm := c.Brokers[0].Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "rf3"); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "solo", -1, -1
	ct.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{3}}}
	req.Topics, req.TimeoutMillis = append(req.Topics, ct), 30000
	resp, err := req.RequestWith(ctx, c.Brokers[0].Client())
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create solo on node 3: %v %+v", err, resp)
	}
	ctl := "--bootstrap-controller=" + c.Brokers[0].Server().ControllerAddr().String()
	status := func() clusterStatus {
		t.Helper()
		var st clusterStatus
		out := ok(t, bin, "", "cluster", "status", ctl, "-o", "json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("%v in %s", err, out)
		}
		return st
	}
	wait := func(what string, cond func(clusterStatus) bool) clusterStatus {
		t.Helper()
		for {
			st := status()
			if cond(st) {
				return st
			}
			select {
			case <-ctx.Done():
				t.Fatalf("cluster status never showed %s: %+v", what, st)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	wait("three brokers, every partition healthy", func(st clusterStatus) bool {
		return len(st.Brokers) == 3 && st.Partitions == 2 && len(st.UnderReplicated) == 0 && len(st.OfflinePartitions) == 0
	})
	c.Brokers[2].Close() // node 3
	st := wait("rf3-0 under-replicated and solo-0 offline", func(st clusterStatus) bool {
		return len(st.Brokers) == 2 && slices.Contains(st.UnderReplicated, "rf3-0") && slices.Equal(st.OfflinePartitions, []string{"solo-0"})
	})
	if st.Partitions != 2 {
		t.Errorf("status %+v", st)
	}
	out := ok(t, bin, "", "cluster", "status", ctl)
	for _, want := range []string{"2 partitions, 1 offline,", "offline partitions: solo-0", "under-replicated partitions: rf3-0"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestTopicDescribeReplicatedSize: `strata topic describe` of an RF=3
// topic reports each partition's size as its leader's replica holds it
// (as the console does), not the sum over the three replicas; before,
// the SIZE column of a replicated topic was three times the log.
func TestTopicDescribeReplicatedSize(t *testing.T) {
	bin := buildStrata(t)
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3})
	b := "--brokers=" + c.Brokers[0].Addr()
	ok(t, bin, "", "topic", "create", "rf3", "--partitions", "3", "--replication-factor", "3", b)
	var lines strings.Builder
	for i := range 300 {
		fmt.Fprintf(&lines, "k%d:value %d\n", i, i)
	}
	ok(t, bin, lines.String(), "produce", "rf3", "-K:", "--acks", "all", b)
	var d topicDescription
	if err := json.Unmarshal([]byte(ok(t, bin, "", "topic", "describe", "rf3", "-o", "json", b)), &d); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := c.Brokers[0].Admin()
	if len(d.Partitions) != 3 {
		t.Fatalf("partitions %+v", d.Partitions)
	}
	for _, p := range d.Partitions {
		dirs, err := adm.DescribeBrokerLogDirs(ctx, p.Leader, kadm.TopicsSet{"rf3": {p.Partition: {}}})
		if err != nil {
			t.Fatal(err)
		}
		var leaderSize int64
		dirs.Each(func(ld kadm.DescribedLogDir) { leaderSize += ld.Topics["rf3"][p.Partition].Size })
		if leaderSize == 0 || p.SizeBytes != leaderSize {
			t.Errorf("partition %d: size %d, its leader %d holds %d bytes", p.Partition, p.SizeBytes, p.Leader, leaderSize)
		}
	}
}

// TestClusterStatusNoController: `strata cluster status` at an address
// where no controller listens (the default 127.0.0.1:9093 against a
// zero-configuration broker, whose controller listener is a port chosen at
// start) says so at once and where to find the address, instead of
// "metadata store unavailable (is a majority of the controllers
// running?)" after the whole --timeout.
func TestClusterStatusNoController(t *testing.T) {
	bin := buildStrata(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	want := fmt.Sprintf("strata: no controller listener answers at %[1]s (--bootstrap-controller): dial tcp %[1]s: connect: connection refused; "+
		"give a controller listener of the cluster, an address of its controller.quorum.voters (a broker started with no KRaft setting logs its own at start: "+
		"\"strata broker listening ... controller=HOST:PORT\")\n", addr)
	fails(t, bin, want, "cluster", "status", "--bootstrap-controller", addr, "--timeout", "3s")
	fails(t, bin, want, "controller", "remove", "--controller-id", "2", "--bootstrap-controller", addr, "--timeout", "3s")
}

// TestControllerOnNewDiskRejoins: a controller of three whose disk was
// replaced (an empty log dir) cannot start as the member the others know;
// the refusal says how to bring it back, and following it (controller
// remove, controller add, start) works. Before, the refusal was etcd's
// bare "member ... has already been bootstrapped", and the failed start
// left a new cluster id in meta.properties and member data in the
// metadata dir, so that `controller add` refused the directory and the
// node, once added, refused to start ("the log directories belong to
// cluster X").
func TestControllerOnNewDiskRejoins(t *testing.T) {
	bin := buildStrata(t)
	var mu sync.Mutex
	var cfg3 *config.Broker
	c := servertest.StartN(t, 3, servertest.Options{Controllers: 3, Configure: func(i int, cfg *config.Broker) error {
		if i == 2 {
			mu.Lock()
			cfg3 = cfg
			mu.Unlock()
		}
		return nil
	}})
	ctl := "--bootstrap-controller=" + c.Brokers[0].Server().ControllerAddr().String()
	n3 := c.Brokers[2]
	addr3 := n3.Server().ControllerAddr().String()
	n3.Close()
	if err := os.RemoveAll(n3.Dir); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	cfg := cfg3
	mu.Unlock()
	srv, err := server.NewWithOptions(cfg, nil, server.Options{StoreTiming: servertest.StoreTiming})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = srv.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "remove it with `strata controller remove --controller-id 3`, add it back with `strata controller add --controller-id 3 --controller-address "+addr3) {
		t.Fatalf("start on an empty disk: %v", err)
	}
	ok(t, bin, "", "controller", "remove", "--controller-id", "3", ctl)
	ok(t, bin, "", "controller", "add", "--controller-id", "3", "--controller-address", addr3, "--metadata-dir", n3.Dir, ctl)
	n3.Open()
	var st clusterStatus
	if err := json.Unmarshal([]byte(ok(t, bin, "", "cluster", "status", ctl, "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Controllers) != 3 || len(st.Brokers) != 3 {
		t.Errorf("after the rejoin: %+v", st)
	}
}
