package server_test

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/servertest"
)

// panicLog counts the "handler panic" lines of a broker's log (protocol
// turns a handler's panic into a closed connection and logs it; the
// fuzzer must see it as a failure).
type panicLog struct {
	mu    sync.Mutex
	lines []string
}

func (p *panicLog) Write(b []byte) (int, error) {
	if strings.Contains(string(b), "handler panic") {
		p.mu.Lock()
		p.lines = append(p.lines, string(b))
		p.mu.Unlock()
	}
	return len(b), nil
}

func (p *panicLog) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.lines
	p.lines = nil
	return out
}

// fuzzSeedRequests encodes every API key the broker advertises, at its
// lowest and highest version, as a request body (header included): the
// kmsg default request, and for the data keys one naming topic "t".
func fuzzSeedRequests(t testing.TB, cl *kgo.Client) [][]byte {
	t.Helper()
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	encode := func(req kmsg.Request) []byte {
		var b []byte
		b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
		b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
		b = binary.BigEndian.AppendUint32(b, 7)
		b = binary.BigEndian.AppendUint16(b, 4)
		b = append(b, "fuzz"...)
		if req.IsFlexible() {
			b = append(b, 0)
		}
		return req.AppendTo(b)
	}
	var out [][]byte
	for _, k := range av.ApiKeys {
		for _, v := range []int16{k.MinVersion, k.MaxVersion} {
			req := kmsg.RequestForKey(k.ApiKey)
			if req == nil {
				continue
			}
			req.SetVersion(v)
			switch r := req.(type) {
			case *kmsg.ProduceRequest:
				rt := kmsg.NewProduceRequestTopic()
				rt.Topic = "t"
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Records = hBatch(0, 2, 1, append(hRecord(0, "a"), hRecord(1, "b")...))
				rt.Partitions = append(rt.Partitions, rp)
				r.Topics, r.Acks, r.TimeoutMillis = append(r.Topics, rt), -1, 1000
			case *kmsg.FetchRequest:
				ft := kmsg.NewFetchRequestTopic()
				ft.Topic = "t"
				ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
				r.Topics, r.MaxWaitMillis = append(r.Topics, ft), 10
			case *kmsg.MetadataRequest:
				mt := kmsg.NewMetadataRequestTopic()
				mt.Topic = kmsg.StringPtr("t")
				r.Topics = append(r.Topics, mt)
			case *kmsg.ListOffsetsRequest:
				lt := kmsg.NewListOffsetsRequestTopic()
				lt.Topic = "t"
				lt.Partitions = append(lt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
				r.Topics = append(r.Topics, lt)
			case *kmsg.CreateTopicsRequest:
				ct := kmsg.NewCreateTopicsRequestTopic()
				ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "fuzz", 1, 1
				r.Topics = append(r.Topics, ct)
			}
			out = append(out, encode(req))
		}
	}
	return out
}

// FuzzHandleRequest sends arbitrary request bytes (a whole request: header
// and body, decoded by kmsg, then handled by Strata's handlers) to a real
// broker over TCP, followed by an ApiVersions request on the same
// connection. The handler must not panic (a panic is turned into a closed
// connection and logged), and the broker must keep serving: a fresh
// connection's ApiVersions is answered after every input. Seeds are every
// advertised API key at its lowest and highest version.
func FuzzHandleRequest(f *testing.F) {
	logs := &panicLog{}
	tb := servertest.Start(f, servertest.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))})
	cl := tb.Client()
	defer cl.Close()
	if _, err := tb.Admin().CreateTopic(context.Background(), 2, 1, nil, "t"); err != nil {
		f.Fatal(err)
	}
	for i := range 4 {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "t", Partition: int32(i % 2), Value: []byte("v")}).FirstErr(); err != nil {
			f.Fatal(err)
		}
	}
	for _, s := range fuzzSeedRequests(f, cl) {
		f.Add(s)
	}
	apiVersions := func(corr int32) []byte {
		b := binary.BigEndian.AppendUint32(nil, 10)
		b = binary.BigEndian.AppendUint16(b, 18)
		b = binary.BigEndian.AppendUint16(b, 0)
		b = binary.BigEndian.AppendUint32(b, uint32(corr))
		return binary.BigEndian.AppendUint16(b, 0xffff) // null client id
	}
	const probe = 0x7ffffff0
	// exchange writes frames on a fresh connection and reads responses
	// until the probe's (true) or the connection ends or stalls (false).
	exchange := func(frames []byte, wait time.Duration) bool {
		c, err := net.Dial("tcp", tb.Addr())
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(wait))
		if _, err := c.Write(frames); err != nil {
			return false
		}
		for {
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return false
			}
			n := binary.BigEndian.Uint32(size[:])
			if n < 4 || n > 64<<20 {
				return false
			}
			body := make([]byte, n)
			if _, err := io.ReadFull(c, body); err != nil {
				return false
			}
			if int32(binary.BigEndian.Uint32(body)) == probe {
				return true
			}
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 1<<20 {
			return
		}
		frames := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
		frames = append(frames, body...)
		// A request may legitimately wait (a fetch's MaxWaitMillis, a
		// JoinGroup's rebalance): the probe behind it is then not
		// answered in time, and the connection is dropped.
		exchange(append(frames, apiVersions(probe)...), 2*time.Second)
		if p := logs.take(); len(p) > 0 {
			t.Fatalf("handler panicked: %s", p[0])
		}
		if !exchange(apiVersions(probe), time.Minute) {
			t.Fatalf("broker stopped answering ApiVersions on a new connection")
		}
	})
}
