package server_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawRequest encodes a full request frame.
func rawRequest(req kmsg.Request, corr int32) []byte {
	body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(req.GetVersion()))
	body = binary.BigEndian.AppendUint32(body, uint32(corr))
	body = binary.BigEndian.AppendUint16(body, 3)
	body = append(body, "raw"...)
	if req.IsFlexible() {
		body = append(body, 0)
	}
	body = req.AppendTo(body)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// expectClosed checks the broker closes the connection (EOF or reset)
// without answering.
func expectClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	_, err := c.Read(buf)
	if err == nil {
		t.Errorf("%s: broker answered instead of closing", what)
		return
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("%s: connection still open after 5s", what)
	}
}

func TestGarbageClosesOnlyThatConnection(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"socket.request.max.bytes": "1048576"})
	ctx := ctxT(t)
	good := tb.Client(kgo.DefaultProduceTopic("robust"), kgo.AllowAutoTopicCreation())
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 9
	valid := rawRequest(meta, 1)
	cases := map[string][]byte{
		"garbage":          []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"oversized length": {0x7f, 0xff, 0xff, 0xff, 1, 2, 3},
		"over max bytes":   binary.BigEndian.AppendUint32(nil, 2<<20),
		"negative length":  {0xff, 0xff, 0xff, 0xfe},
		"tiny length":      {0, 0, 0, 2, 0, 0},
		"unknown api key":  append(binary.BigEndian.AppendUint32(nil, 10), 0x7f, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0),
		"bad version":      append(append([]byte{}, valid[:6]...), append([]byte{0x7f, 0x00}, valid[8:]...)...),
		"truncated body":   append(binary.BigEndian.AppendUint32(nil, uint32(len(valid)-4-3)), valid[4:len(valid)-3]...),
		"truncated frame":  valid[:len(valid)-5],
	}
	for name, payload := range cases {
		c, err := net.Dial("tcp", tb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(payload); err != nil {
			t.Fatalf("%s: write: %v", name, err)
		}
		if name == "truncated frame" || name == "over max bytes" || name == "oversized length" {
			// Peer goes away mid-frame, or the length alone is refused.
			if name == "truncated frame" {
				c.Close()
				continue
			}
		}
		expectClosed(t, c, name)
		c.Close()
	}
	// A pipelined well-behaved raw client gets in-order answers.
	c, err := net.Dial("tcp", tb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var batch []byte
	for i := int32(0); i < 20; i++ {
		batch = append(batch, rawRequest(meta, 100+i)...)
	}
	if _, err := c.Write(batch); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := int32(0); i < 20; i++ {
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			t.Fatal(err)
		}
		if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != 100+i {
			t.Fatalf("response %d has correlation id %d", i, corr)
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(hdr[:4]))-4); err != nil {
			t.Fatal(err)
		}
	}
	// And the kgo client still works.
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("well-behaved client after garbage: %v", err)
	}
	got := consumeAll(t, tb, "robust", 2)
	if string(got[1].Value) != "after" {
		t.Errorf("read back %q", got[1].Value)
	}
}

func TestApiVersionsExact(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	cl := tb.Client()
	req := kmsg.NewPtrApiVersionsRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int16][2]int16{0: {0, 11}, 1: {4, 15}, 2: {0, 7}, 3: {0, 12}, 18: {0, 4}, 19: {2, 7}, 20: {1, 6},
		21: {0, 2}, 22: {0, 4}, 23: {2, 4}, 32: {1, 4}, 33: {0, 2}, 35: {1, 4}, 37: {0, 3}, 44: {0, 1}, 60: {0, 1}, 68: {0, 1}, 69: {0, 1}}
	got := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %d (%s): advertised %v, want %v", k, kmsg.NameForKey(k), got[k], v)
		}
	}
	// Every advertised version of every key decodes with kmsg.
	for k, v := range got {
		if r := kmsg.RequestForKey(k); r == nil || r.MaxVersion() < v[1] {
			t.Errorf("key %d advertised up to v%d beyond kmsg", k, v[1])
		}
	}
	// ApiVersions above the served version: v0 answer with UNSUPPORTED_VERSION.
	c, err := net.Dial("tcp", tb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 5
	if _, err := c.Write(rawRequest(av, 9)); err != nil {
		t.Fatal(err)
	}
	var hdr [8]byte
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:4])-4)
	if _, err := io.ReadFull(c, body); err != nil {
		t.Fatal(err)
	}
	r0 := kmsg.NewPtrApiVersionsResponse()
	r0.Version = 0
	if err := r0.ReadFrom(body); err != nil || r0.ErrorCode != 35 || len(r0.ApiKeys) != 1 {
		t.Errorf("unsupported ApiVersions answer: %v %+v", err, r0)
	}
}

func TestAdvertisedListener(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"advertised.listeners": "PLAINTEXT://kafka.example:19092"})
	ctx := ctxT(t)
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, tb.Client())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].Host != "kafka.example" || resp.Brokers[0].Port != 19092 {
		t.Errorf("advertised broker: %+v (bound %s)", resp.Brokers, tb.Addr())
	}
	if resp.ClusterID == nil || *resp.ClusterID == "" || resp.ControllerID != 1 {
		t.Errorf("cluster id / controller: %v %d", resp.ClusterID, resp.ControllerID)
	}
}
