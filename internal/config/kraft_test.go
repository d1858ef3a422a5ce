package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKRaftIssueCommandLine: the settings of the issue's three-node
// command line (node 1) load with Kafka's meaning.
func TestKRaftIssueCommandLine(t *testing.T) {
	b, err := LoadBroker("", nil, map[string]string{
		"node.id": "1", "process.roles": "broker,controller",
		"listeners":                 "PLAINTEXT://127.0.0.1:19192,CONTROLLER://127.0.0.1:19193",
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  "1@127.0.0.1:19193,2@127.0.0.1:19293,3@127.0.0.1:19393",
		"log.dirs":                  "/tmp/strata-n1", "strata.metrics.listener": "127.0.0.1:19194",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !b.HasRole(RoleBroker) || !b.HasRole(RoleController) {
		t.Error("roles")
	}
	cl, ok := b.ControllerListener()
	if !ok || cl.Name != "CONTROLLER" || cl.Protocol != ProtocolPlaintext || cl.Port != 19193 {
		t.Errorf("controller listener %+v %v (CONTROLLER maps to PLAINTEXT when the map is not set, as Kafka)", cl, ok)
	}
	cls := b.ClientListeners()
	if len(cls) != 1 || cls[0].Name != "PLAINTEXT" || cls[0].Port != 19192 || b.ListenerProtocol() != ProtocolPlaintext {
		t.Errorf("client listeners %+v", cls)
	}
	if adv := b.AdvertisedListeners(); len(adv) != 1 || adv[0].Addr() != "127.0.0.1:19192" {
		t.Errorf("advertised %+v", adv)
	}
	if vs := b.Voters(); len(vs) != 3 || vs[1].ID != 2 || vs[1].Port != 19293 {
		t.Errorf("voters %+v", vs)
	}
	if ib, _ := b.InterBrokerListener(); ib.Name != "PLAINTEXT" || b.Int("broker.session.timeout.ms") != 9000 || b.Int("broker.heartbeat.interval.ms") != 2000 {
		t.Error("defaults")
	}
}

// TestKRaftKafkaExample: Apache Kafka's config/kraft combined-mode
// server.properties, with only paths changed, loads.
func TestKRaftKafkaExample(t *testing.T) {
	props := `process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
log.dirs=` + t.TempDir() + `
num.partitions=1
`
	path := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := LoadBroker(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if adv := b.AdvertisedListeners(); len(adv) != 1 || adv[0].Addr() != "localhost:9092" {
		t.Errorf("advertised %+v", adv)
	}
}

func TestKRaftRefusals(t *testing.T) {
	base := map[string]string{
		"node.id": "1", "process.roles": "broker,controller",
		"listeners":                 "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19193",
		"controller.listener.names": "CONTROLLER",
		"controller.quorum.voters":  "1@127.0.0.1:19193",
	}
	cases := []struct {
		name string
		ovr  map[string]string
		want string
	}{
		{"bad role", map[string]string{"process.roles": "broker,zookeeper"}, `unknown role "zookeeper"`},
		{"dup role", map[string]string{"process.roles": "broker,broker"}, "duplicate role names"},
		{"no controller names", map[string]string{"controller.listener.names": ""}, "controller.listener.names must not be empty when running in KRaft mode"},
		{"controller name not a listener", map[string]string{"controller.listener.names": "CTL"}, "controller.listener.names must contain at least one value appearing in the 'listeners' configuration"},
		{"not a voter", map[string]string{"node.id": "2"}, "the node id 2 must be included in the set of voters"},
		{"broker with controller listener", map[string]string{"process.roles": "broker", "node.id": "4"}, "must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role"},
		{"unmapped listener", map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19193,INTERNAL://127.0.0.1:0"}, "no security protocol defined for listener INTERNAL"},
		{"two client listeners, no inter-broker one", map[string]string{"listeners": "EXTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:19193,INTERNAL://127.0.0.1:0",
			"listener.security.protocol.map": "EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT"}, "security.inter.broker.protocol gives PLAINTEXT, and the client listeners are EXTERNAL, INTERNAL"},
		{"both inter-broker settings", map[string]string{"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "only one of inter.broker.listener.name and security.inter.broker.protocol should be set"},
		{"voters syntax", map[string]string{"controller.quorum.voters": "1@127.0.0.1"}, "is not id@host:port"},
		{"inter-broker unknown", map[string]string{"inter.broker.listener.name": "INTERNAL"}, "inter.broker.listener.name must be a listener name defined in listeners"},
		{"heartbeat too slow", map[string]string{"broker.heartbeat.interval.ms": "6000"}, "must be less than two thirds of broker.session.timeout.ms"},
		{"advertised controller elsewhere", map[string]string{"advertised.listeners": "CONTROLLER://h:1"}, "advertised.listeners gives the controller listener CONTROLLER as h:1 but controller.quorum.voters names node 1 at 127.0.0.1:19193"},
		{"advertised controller on a broker", map[string]string{"process.roles": "broker", "node.id": "4", "listeners": "PLAINTEXT://127.0.0.1:0",
			"advertised.listeners": "CONTROLLER://127.0.0.1:19193"}, "advertised.listeners names listener CONTROLLER, which is not in listeners"},
		{"ssl controller", map[string]string{"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}, "serves controller listeners over PLAINTEXT only"},
		{"bad map", map[string]string{"listener.security.protocol.map": "CONTROLLER:TLS"}, "invalid security protocol `TLS`"},
		{"ssl controller on a broker", map[string]string{"process.roles": "broker", "node.id": "4", "listeners": "PLAINTEXT://127.0.0.1:0",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}, "reaches controllers over PLAINTEXT only"},
		{"two controller listeners", map[string]string{"controller.listener.names": "CONTROLLER,CTL2",
			"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19193,CTL2://127.0.0.1:19194"}, "serves one controller listener per node"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ovr := map[string]string{}
			for k, v := range base {
				ovr[k] = v
			}
			for k, v := range c.ovr {
				ovr[k] = v
			}
			_, err := LoadBroker("", nil, ovr)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want %q", err, c.want)
			}
		})
	}
	// KIP-853: a controller advertising its controller listener at its
	// voter address is fine (Kafka's 4.x-era stock file does it).
	ok := map[string]string{}
	for k, v := range base {
		ok[k] = v
	}
	ok["advertised.listeners"] = "PLAINTEXT://localhost:9092,CONTROLLER://127.0.0.1:19193"
	if _, err := LoadBroker("", nil, ok); err != nil {
		t.Errorf("advertised controller listener at the voter address: %v", err)
	}
	// Zero configuration stays valid: no KRaft setting is required.
	if _, err := LoadBroker("", nil, nil); err != nil {
		t.Errorf("zero configuration: %v", err)
	}
}

// TestWithOneNodeCluster: zero configuration's implicit KRaft settings make
// a combined node whose only voter is itself on the given controller
// address, without marking anything as set; KRaft settings given refuse it.
func TestWithOneNodeCluster(t *testing.T) {
	b, err := LoadBroker("", nil, map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "node.id": "3"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Clustered() {
		t.Fatal("zero configuration is not clustered before WithOneNodeCluster")
	}
	nb, err := b.WithOneNodeCluster("127.0.0.1:41000")
	if err != nil {
		t.Fatal(err)
	}
	if !nb.Clustered() || !nb.OneNodeCluster() || nb.KRaftConfigured() || nb.IsSet("controller.quorum.voters") {
		t.Errorf("clustered %v one-node %v configured %v", nb.Clustered(), nb.OneNodeCluster(), nb.KRaftConfigured())
	}
	if cl, ok := nb.ControllerListener(); !ok || cl.Addr() != "127.0.0.1:41000" || cl.Protocol != ProtocolPlaintext {
		t.Errorf("controller listener %+v %v", cl, ok)
	}
	if v := nb.Voters(); len(v) != 1 || v[0].ID != 3 || v[0].Port != 41000 {
		t.Errorf("voters %+v", v)
	}
	if cls := nb.ClientListeners(); len(cls) != 1 || cls[0].Name != "PLAINTEXT" {
		t.Errorf("client listeners %+v", cls)
	}
	if !nb.HasRole(RoleBroker) || !nb.HasRole(RoleController) {
		t.Error("roles")
	}
	k, err := LoadBroker("", nil, map[string]string{"process.roles": "broker,controller", "node.id": "1",
		"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19193", "controller.listener.names": "CONTROLLER",
		"controller.quorum.voters": "1@127.0.0.1:19193"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.WithOneNodeCluster("127.0.0.1:41000"); err == nil {
		t.Error("WithOneNodeCluster over KRaft settings")
	}
}
