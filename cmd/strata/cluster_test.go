package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

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
