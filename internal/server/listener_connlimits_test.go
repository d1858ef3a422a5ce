package server_test

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
)

// waitingConn dials addr and sends an ApiVersions request the broker is
// not expected to answer yet (its acceptor waits for a slot).
func waitingConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr) // the kernel completes it; the broker does not accept it yet
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(rawRequest(kmsg.NewPtrApiVersionsRequest(), 7)); err != nil {
		t.Fatal(err)
	}
	return c
}

// notAnswered checks that c gets no answer while observed for 500 ms.
func notAnswered(t *testing.T, c net.Conn, why string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := c.Read(make([]byte, 4)); err == nil || n > 0 {
		t.Fatalf("connection answered: %s", why)
	}
}

// answered waits (up to 60 s) for c's answer.
func answered(t *testing.T, c net.Conn, why string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("connection not served %s: %v", why, err)
	}
}

// TestListenerMaxConnectionsProtectedListener: Kafka's ConnectionQuotas
// with two listeners. The inter-broker listener is protected: when clients
// hold every max.connections slot a broker still gets in, and the broker
// then closes the least recently active client connection to be back at
// the limit; a client connection beyond it waits.
func TestListenerMaxConnectionsProtectedListener(t *testing.T) {
	tb := startBroker(t, "", map[string]string{
		"listeners":                      "EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
		"inter.broker.listener.name":     "INTERNAL",
		"max.connections":                "2",
	})
	ext, internal := tb.ListenerAddr("EXTERNAL"), tb.ListenerAddr("INTERNAL")
	p := tb.Server().Protocol()
	waitFor(func() bool { return p.OpenConnections() == 0 })
	older := dialServed(t, ext)
	newer := dialServed(t, ext)
	if err := apiVersions(newer, 2); err != nil { // newer is the more recently active
		t.Fatal(err)
	}
	third := waitingConn(t, ext)
	notAnswered(t, third, "a client connection beyond max.connections=2")
	ib := dialServed(t, internal) // protected: served at the limit
	if !closedByBroker(older) {
		t.Fatal("the least recently active client connection was not closed to make room for the inter-broker one")
	}
	if err := apiVersions(newer, 3); err != nil {
		t.Fatalf("the more recently active client connection was closed too: %v", err)
	}
	notAnswered(t, third, "the broker is at max.connections (one client, one inter-broker connection)")
	ib.Close()
	answered(t, third, "after the inter-broker connection closed")
}

// TestListenerMaxConnectionsDynamic: listener.name.<l>.max.connections
// bounds one listener (its acceptor waits while the listener holds that
// many) whatever the other listeners hold, and a dynamic change of it (a
// cluster-wide broker config, as in Kafka) lets the waiting connection in.
func TestListenerMaxConnectionsDynamic(t *testing.T) {
	c := servertest.StartN(t, 1, servertest.Options{Controllers: 1, Settings: map[string]string{
		"listeners":                                "EXTERNAL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map":           "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":               "INTERNAL",
		"listener.name.external.max.connections":   "2",
		"offsets.topic.replication.factor":         "1",
		"transaction.state.log.replication.factor": "1",
	}, Logger: servertest.TestLogger(t, slog.LevelWarn)})
	b := c.Brokers[0]
	ext, internal := b.ListenerAddr("EXTERNAL"), b.ListenerAddr("INTERNAL")
	dialServed(t, ext)
	dialServed(t, ext)
	third := waitingConn(t, ext)
	notAnswered(t, third, "beyond listener.name.external.max.connections=2")
	for i := 0; i < 3; i++ { // the other listener is not bounded by it
		dialServed(t, internal)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(internal))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := alterBroker(t, adm, []kadm.AlterConfig{{Name: "listener.name.external.max.connections", Value: str("3")}}); err != nil {
		t.Fatalf("raise listener.name.external.max.connections: %v", err)
	}
	answered(t, third, "after listener.name.external.max.connections was raised to 3")
	// A per-listener setting Strata cannot change while running is refused.
	err = alterBroker(t, adm, []kadm.AlterConfig{{Name: "listener.name.external.sasl.enabled.mechanisms", Value: str("PLAIN")}}, 1)
	if err == nil {
		t.Fatal("a per-listener SASL setting was accepted dynamically")
	}
}
