package server_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersions sends an ApiVersions request on c and reads its answer.
func apiVersions(c net.Conn, corr int32) error {
	_, err := rawRoundTrip(c, kmsg.NewPtrApiVersionsRequest(), corr)
	return err
}

// dialServed opens a connection and checks the broker serves it.
func dialServed(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := apiVersions(c, 1); err != nil {
		t.Fatalf("connection not served: %v", err)
	}
	return c
}

// closedByBroker reports whether the broker closed c (a read ends with EOF
// or a reset) rather than leaving it open for 10 s.
func closedByBroker(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// waitFor polls cond (no deadline of its own: the test's timeout bounds it).
func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMaxConnectionsPerIP: beyond max.connections.per.ip (or the address's
// override) a new connection is closed at once; the others are served, and
// a slot freed is usable again.
func TestMaxConnectionsPerIP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		settings map[string]string
		limit    int
	}{
		{"default limit", map[string]string{"max.connections.per.ip": "3"}, 3},
		{"override", map[string]string{"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:4,127.0.0.2:9"}, 4},
		{"zero with an override", map[string]string{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "localhost:2"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := startBroker(t, "", tc.settings)
			var open []net.Conn
			for i := 0; i < tc.limit; i++ {
				open = append(open, dialServed(t, tb.Addr()))
			}
			extra, err := net.Dial("tcp", tb.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer extra.Close()
			if !closedByBroker(extra) {
				t.Fatalf("connection %d from one address was not closed (limit %d)", tc.limit+1, tc.limit)
			}
			for i, c := range open {
				if err := apiVersions(c, 2); err != nil {
					t.Errorf("connection %d within the limit: %v", i, err)
				}
			}
			open[0].Close()
			waitFor(func() bool { return tb.Server().Protocol().OpenConnections() < tc.limit })
			dialServed(t, tb.Addr())
		})
	}
}

// TestMaxConnections: with max.connections open the broker stops
// accepting; a new connection waits (in the backlog) and is served once
// another closes.
func TestMaxConnections(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"max.connections": "2"})
	a := dialServed(t, tb.Addr())
	dialServed(t, tb.Addr())
	c, err := net.Dial("tcp", tb.Addr()) // the kernel completes it; the broker does not accept it yet
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(rawRequest(kmsg.NewPtrApiVersionsRequest(), 7)); err != nil {
		t.Fatal(err)
	}
	// Not answered while two connections are open (observed for 500 ms).
	_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := c.Read(make([]byte, 4)); err == nil || n > 0 {
		t.Fatalf("third connection answered beyond max.connections=2")
	}
	if got := tb.Server().Protocol().OpenConnections(); got != 2 {
		t.Fatalf("%d connections open, want 2", got)
	}
	a.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("third connection not served after one closed: %v", err)
	}
}

// TestIdleConnectionsClosed: a connection idle longer than
// connections.max.idle.ms is closed; one with a request in progress (a
// long-polling fetch) is not, and clients reconnect transparently.
func TestIdleConnectionsClosed(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"connections.max.idle.ms": "300"})
	idle := dialServed(t, tb.Addr())
	if !closedByBroker(idle) {
		t.Fatal("idle connection still open")
	}
	// A fetch waiting 2 s on an empty partition outlives the idle limit.
	cl := tb.Client(kgo.DefaultProduceTopic("idle"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	c := dialServed(t, tb.Addr())
	f := kmsg.NewPtrFetchRequest()
	f.Version, f.MaxWaitMillis, f.MinBytes, f.MaxBytes = 12, 2000, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "idle"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, 1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	if _, err := rawRoundTrip(c, f, 3); err != nil {
		t.Fatalf("long-polling fetch cut by the idle limit: %v", err)
	}
	// The client keeps working across closed idle connections.
	time.Sleep(700 * time.Millisecond)
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("produce after idle close: %v", err)
	}
}

// TestQueuedMaxRequestBytes: once queued.max.request.bytes of requests are
// read and not yet handled, the broker reads no more requests, from any
// connection, until they are handled.
func TestQueuedMaxRequestBytes(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"socket.request.max.bytes": "1048576", "queued.max.request.bytes": "1048576",
		"group.initial.rebalance.delay.ms": "5000"})
	cl := tb.Client(kgo.DefaultProduceTopic("q"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctxT(t), &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A: the first JoinGroup of a group, answered after the 5 s initial
	// rebalance delay (its handler holds A's pipeline meanwhile), then two
	// 600 KB produce requests read ahead behind it, not handled until it
	// is.
	a := dialServed(t, tb.Addr())
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version, j.Group, j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = 3, "q-group", 60000, 60000, "consumer"
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0}
	j.Protocols = append(j.Protocols, jp)
	frames := rawRequest(j, 10)
	big := make([]byte, 600_000)
	for i := int32(0); i < 2; i++ {
		frames = append(frames, rawRequest(produceRequest("q", hBatch(0, 1, 0, hRecord(0, string(big)))), 11+i)...)
	}
	if _, err := a.Write(frames); err != nil {
		t.Fatal(err)
	}
	p := tb.Server().Protocol()
	waitFor(func() bool { return p.QueuedRequestBytes() >= 1<<20 })
	// B's request is not read while they are held (observed for 500 ms).
	b, err := net.Dial("tcp", tb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Write(rawRequest(kmsg.NewPtrApiVersionsRequest(), 1)); err != nil {
		t.Fatal(err)
	}
	_ = b.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if n, err := b.Read(make([]byte, 4)); err == nil || n > 0 {
		t.Fatalf("a request was read while queued.max.request.bytes were held by unhandled requests (queued %d)", p.QueuedRequestBytes())
	}
	// Once A's JoinGroup is answered its requests are handled and B is
	// served.
	_ = b.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(b, size[:]); err != nil {
		t.Fatalf("B not served once the queued requests were handled: %v", err)
	}
	if got := p.QueuedRequestBytes(); got > 1<<20 {
		t.Errorf("%d bytes still queued", got)
	}
}

// produceRequest is an acks=1 Produce of records to partition 0 of topic.
func produceRequest(topic string, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = 1, 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
