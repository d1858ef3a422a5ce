package server_test

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/server"
	"github.com/strata-io/strata/internal/servertest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// freePort returns a loopback port that was free a moment ago (the
// controller listener's port must be known before start: it is in
// controller.quorum.voters).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func kraftSettings(t *testing.T, nodeID int, ctlPort int) map[string]string {
	return map[string]string{
		"node.id":                   fmt.Sprint(nodeID),
		"process.roles":             "broker,controller",
		"listeners":                 fmt.Sprintf("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", ctlPort),
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  fmt.Sprintf("%d@127.0.0.1:%d", nodeID, ctlPort),
	}
}

// TestKRaftCombinedSingleNode: a combined node configured with Kafka's
// KRaft settings serves its metadata store on the controller listener,
// registers with a new broker epoch at every start, reports the store in
// its metrics, and serves clients as before.
func TestKRaftCombinedSingleNode(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	b := servertest.Start(t, servertest.Options{Dir: dir, Settings: kraftSettings(t, 1, port), Metrics: true})
	t.Logf("start with the metadata store: %v", b.StartTook())
	ctx := ctxT(t)
	if _, err := b.Admin().CreateTopic(ctx, 1, 1, nil, "k"); err != nil {
		t.Fatal(err)
	}
	cl := b.Client(kgo.DefaultProduceTopic("k"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + b.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"strata_metadata_store_has_leader 1", "strata_metadata_store_members 1", "strata_metadata_store_is_leader 1"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The controller port is the metadata store's: an HTTP/1.1 request
	// there reaches etcd's peer handler, not a Kafka listener.
	if r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/members", port)); err != nil {
		t.Errorf("controller listener: %v", err)
	} else {
		r.Body.Close()
	}
	epoch := b.Server().BrokerEpoch()
	if epoch <= 0 {
		t.Fatalf("broker epoch %d", epoch)
	}
	b.Close()
	b.Open() // restart on the same data: the member restarts, a new registration
	if e2 := b.Server().BrokerEpoch(); e2 <= epoch {
		t.Errorf("broker epoch after restart %d, before %d: it must change at every start (KIP-903)", e2, epoch)
	}
	cl2 := b.Client(kgo.ConsumeTopics("k"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cl2.PollFetches(ctx)
	if errs := fs.Errors(); len(errs) > 0 || fs.NumRecords() != 1 {
		t.Fatalf("after restart: %v, %d records", errs, fs.NumRecords())
	}
}

// TestKRaftControllerOnly: a controller-only node (process.roles=
// controller) runs the metadata store member and the controller, serves no
// Kafka listener and is not a broker: a broker-only node that names it as
// its voter registers, creates topics through it and serves clients, and
// Metadata lists the broker only (Kafka's brokers never list controllers).
func TestKRaftControllerOnly(t *testing.T) {
	port := freePort(t)
	ctl := map[string]string{
		"node.id": "1", "process.roles": "controller",
		"listeners":                 fmt.Sprintf("CONTROLLER://127.0.0.1:%d", port),
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  fmt.Sprintf("1@127.0.0.1:%d", port),
		"log.dirs":                  t.TempDir(), "strata.metrics.listener": "127.0.0.1:0",
	}
	cfg, err := config.LoadBroker("", nil, ctl)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctxT(t))
	if srv.Addr() != nil || srv.Broker() != nil {
		t.Fatalf("controller-only node serves Kafka at %v", srv.Addr())
	}
	if !srv.Ready() {
		t.Fatal("controller-only node not ready after Start")
	}
	b := servertest.Start(t, servertest.Options{Settings: map[string]string{
		"node.id": "2", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0",
		"controller.listener.names": "CONTROLLER", "controller.quorum.voters": ctl["controller.quorum.voters"],
	}})
	ctx := ctxT(t)
	if _, err := b.Admin().CreateTopic(ctx, 2, 1, nil, "c"); err != nil {
		t.Fatal(err)
	}
	if err := b.Client(kgo.DefaultProduceTopic("c")).ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	bm, err := b.Admin().BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bm.Brokers) != 1 || bm.Brokers[0].NodeID != 2 {
		t.Fatalf("Metadata brokers %+v, want node 2 only", bm.Brokers)
	}
	resp, err := http.Get("http://" + srv.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"strata_metadata_store_has_leader 1", "activecontrollercount 1"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("controller-only metrics lack %q", want)
		}
	}
	// Kafka's rule: a controller-only node lists controller listeners only.
	bad := maps.Clone(ctl)
	bad["listeners"] += ",PLAINTEXT://127.0.0.1:0"
	if _, err := config.LoadBroker("", nil, bad); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "must only contain KRaft controller listeners") {
		t.Fatalf("controller-only with a client listener: %v", err)
	}
}

// TestKRaftWrongClusterID: a node whose log directory was written by
// another cluster is refused by the metadata store it finds.
func TestKRaftWrongClusterID(t *testing.T) {
	port := freePort(t)
	meta := t.TempDir()
	s := kraftSettings(t, 1, port)
	s["metadata.log.dir"] = meta
	b := servertest.Start(t, servertest.Options{Settings: s})
	b.Close()
	// A log directory with data of another cluster (its own metadata
	// store), then started against the first cluster's store.
	other := kraftSettings(t, 1, port)
	other["metadata.log.dir"] = t.TempDir()
	ob := servertest.Start(t, servertest.Options{Settings: other})
	if _, err := ob.Admin().CreateTopic(ctxT(t), 1, 1, nil, "mine"); err != nil {
		t.Fatal(err)
	}
	ob.Close()
	s["log.dirs"] = ob.Dir
	cfg, err := config.LoadBroker("", nil, s)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	_ = srv.Shutdown(ctxT(t))
	if err == nil || !strings.Contains(err.Error(), "belong to cluster") {
		t.Fatalf("got %v", err)
	}
	// A fresh log directory joins the cluster it finds.
	s["log.dirs"] = t.TempDir()
	servertest.Start(t, servertest.Options{Settings: s}).Close()
}
