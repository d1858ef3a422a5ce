package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// canary is a well-behaved client producing with acks=all and consuming
// what it produced, alongside a hostile one.
type canary struct {
	mu      sync.Mutex
	acked   map[int64][]byte // offset -> value the broker acknowledged
	errs    []error
	maxWait time.Duration // slowest acknowledgement (reported, not asserted)
	read    int           // records read back while the hostile cases ran
}

func (c *canary) fail(err error) {
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
}

// produce produces one record at a time (acks=all, idempotent) until ctx
// ends, recording what was acknowledged at which offset.
func (c *canary) produce(ctx context.Context, cl *kgo.Client) {
	payload := bytes.Repeat([]byte("canary "), 40)
	for i := 0; ctx.Err() == nil; i++ {
		v := append([]byte(fmt.Sprintf("%08d ", i)), payload...)
		start := time.Now()
		r, err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).First()
		took := time.Since(start)
		if ctx.Err() != nil {
			return // stopped mid-request: not the broker's doing
		}
		if err != nil {
			c.fail(fmt.Errorf("produce %d: %w", i, err))
			continue
		}
		c.mu.Lock()
		c.acked[r.Offset] = v
		c.maxWait = max(c.maxWait, took)
		c.mu.Unlock()
	}
}

// consume reads the canary partition as it grows, checking every record
// against what the producer was acknowledged.
func (c *canary) consume(ctx context.Context, cl *kgo.Client) {
	next := int64(0)
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		if err := fs.Err(); err != nil {
			c.fail(fmt.Errorf("consume: %w", err))
			continue
		}
		for _, r := range fs.Records() {
			if r.Offset != next {
				c.fail(fmt.Errorf("consume: offset %d, want %d", r.Offset, next))
			}
			next = r.Offset + 1
			c.mu.Lock()
			want, ok := c.acked[r.Offset]
			c.read++
			c.mu.Unlock()
			// An acknowledgement may still be on its way; the final
			// read-back checks every acknowledged record.
			if ok && !bytes.Equal(want, r.Value) {
				c.fail(fmt.Errorf("consume: offset %d reads %q, acknowledged %q", r.Offset, r.Value, want))
			}
		}
	}
}

// dialFrom opens a TCP connection to addr from the local address ip.
func dialFrom(ip, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return d.Dial("tcp", addr)
}

// TestHostileCanary sends every hostile case of issue 9 while a canary
// client produces (acks=all) and consumes: record batches whose header
// disagrees with their records (and a zip bomb), ApiVersions with bad
// client software names, CreateTopics of a million and of MaxInt32
// partitions, a Produce naming 10,000 partitions, a slow CreateTopics of
// 500 partitions, a flood of connections from one address, connections
// that never send a request, pipelined large requests that are refused,
// an oversized frame and garbage bytes. The canary sees no error, every
// record it was acknowledged reads back byte-identical, the hostile
// topic's end offset never moves, and no file or directory appears for
// anything the broker refused. The canary's slowest acknowledgement is
// logged, not asserted (machines differ).
func TestHostileCanary(t *testing.T) {
	if c, err := dialFrom("127.0.0.2", "127.0.0.1:1"); err != nil && strings.Contains(err.Error(), "assign requested address") {
		t.Fatalf("this host cannot use 127.0.0.2 as a source address: %v", err)
	} else if c != nil {
		c.Close()
	}
	tb := startBroker(t, "", map[string]string{
		// The hostile client connects from 127.0.0.2, the canary from
		// 127.0.0.1: the flood is capped for the first only.
		"max.connections.per.ip.overrides": "127.0.0.2:8",
		"connections.max.idle.ms":          "3000",
		"socket.request.max.bytes":         "2097152",
		"queued.max.request.bytes":         "8388608",
		"auto.create.topics.enable":        "false",
	})
	ctx := ctxT(t)
	adm := tb.Admin()
	for _, name := range []string{"canary", "hostile"} {
		if r, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, r.Err)
		}
	}
	hostile := tb.Client()
	if r := produceRaw(t, hostile, "hostile", hBatch(0, 1, 0, hRecord(0, "kept"))); r.ErrorCode != 0 {
		t.Fatalf("good produce to hostile: %d", r.ErrorCode)
	}
	dirsBefore := logDirEntries(t, tb.Dir)
	hostileFiles := logDirEntries(t, filepath.Join(tb.Dir, "hostile-0"))

	// The canary runs until the hostile cases are done.
	can := &canary{acked: map[int64][]byte{}}
	cctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	prod := tb.Client(kgo.DefaultProduceTopic("canary"), kgo.RequiredAcks(kgo.AllISRAcks()))
	cons := tb.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"canary": {0: kgo.NewOffset().AtStart()}}))
	wg.Add(2)
	go func() { defer wg.Done(); can.produce(cctx, prod) }()
	go func() { defer wg.Done(); can.consume(cctx, cons) }()
	waitFor(func() bool { can.mu.Lock(); defer can.mu.Unlock(); return len(can.acked) > 20 })

	// Record batches whose header disagrees with their records.
	for _, h := range hostileBatches(t) {
		if r := produceRaw(t, hostile, "hostile", h.records); !codeIn(r.ErrorCode, h.want) {
			t.Errorf("batch %s: error %d, want one of %v", h.name, r.ErrorCode, h.want)
		}
	}
	// ApiVersions with bad client software names, each on its own
	// connection.
	corr := int32(0)
	for what, bad := range badSoftwareNames() {
		c, err := dialFrom("127.0.0.3", tb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, bad, "1.0"
		corr++
		resp, err := rawRoundTrip(c, req, corr)
		c.Close()
		if err != nil || resp.(*kmsg.ApiVersionsResponse).ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("ApiVersions with %s: %v %+v", what, err, resp)
		}
	}
	// CreateTopics far over the bounds.
	for name, n := range map[string]int32{"refused-million": 1_000_000, "refused-maxint": math.MaxInt32} {
		if codes := createTopicsRaw(t, hostile, false, map[string]int32{name: n}); codes[name] != kerr.PolicyViolation.Code {
			t.Errorf("CreateTopics %s (%d partitions): error %d, want POLICY_VIOLATION", name, n, codes[name])
		}
	}
	// A slow, legitimate CreateTopics running while the rest goes on.
	slowDone := make(chan int16, 1)
	go func() {
		codes := createTopicsRaw(t, tb.Client(), false, map[string]int32{"slow-big": 500})
		slowDone <- codes["slow-big"]
	}()
	// A Produce naming 10,000 partitions (of a topic that does not exist).
	if resp, err := wideProduce("refused-wide", 10_000).RequestWith(ctx, hostile); err != nil {
		t.Errorf("wide produce: %v", err)
	} else {
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("wide produce partition %d: error %d", p.Partition, p.ErrorCode)
				break
			}
		}
	}
	// A flood of connections from one address: 8 are served (the
	// override), the rest closed at once; they then sit idle and are closed
	// after connections.max.idle.ms.
	var flood []net.Conn
	served := 0
	for i := 0; i < 64; i++ {
		c, err := dialFrom("127.0.0.2", tb.Addr())
		if err != nil {
			continue // refused at the kernel's backlog: refused all the same
		}
		flood = append(flood, c)
		if apiVersions(c, 1) == nil {
			served++
		}
	}
	if served > 8 {
		t.Errorf("%d connections from 127.0.0.2 served, limit 8", served)
	}
	// Large pipelined requests (refused batches of ~1.5 MB each) sent
	// without reading an answer, then garbage and an oversized frame.
	pipe, err := dialFrom("127.0.0.3", tb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{'x'}, 1_500_000)
	var frames []byte
	for i := int32(0); i < 12; i++ {
		frames = append(frames, rawRequest(produceRequest("hostile", hBatch(0, 3, 2, hRecord(0, string(big)))), 100+i)...)
	}
	go func() { _, _ = pipe.Write(frames) }() // the broker reads at its own pace
	for _, junk := range [][]byte{
		binary.BigEndian.AppendUint32(nil, 64<<20),                   // a frame over socket.request.max.bytes
		append([]byte{0, 0, 0, 9}, bytes.Repeat([]byte{0xff}, 9)...), // garbage header
	} {
		c, err := dialFrom("127.0.0.1", tb.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write(junk)
		if !closedByBroker(c) {
			t.Errorf("junk %x...: connection left open", junk[:4])
		}
		c.Close()
	}
	if code := <-slowDone; code != 0 {
		t.Errorf("slow CreateTopics of 500 partitions: error %d", code)
	}
	// The idle flood is closed by the broker.
	for i, c := range flood {
		if !closedByBroker(c) {
			t.Errorf("idle flood connection %d still open", i)
		}
		c.Close()
	}
	pipe.Close()

	// The canary keeps going a little after the last hostile case.
	can.mu.Lock()
	mark := len(can.acked)
	can.mu.Unlock()
	waitFor(func() bool { can.mu.Lock(); defer can.mu.Unlock(); return len(can.acked) > mark+20 })
	stop()
	wg.Wait()
	prod.Close()
	cons.Close()

	for _, err := range can.errs {
		t.Errorf("canary: %v", err)
	}
	// Every acknowledged record reads back byte-identical.
	var last int64 = -1
	for off := range can.acked {
		last = max(last, off)
	}
	got := consumeAll(t, tb, "canary", int(last+1))
	for _, r := range got {
		if want, ok := can.acked[r.Offset]; ok && !bytes.Equal(want, r.Value) {
			t.Fatalf("canary offset %d reads back %q, acknowledged %q", r.Offset, r.Value, want)
		}
	}
	for off := range can.acked {
		if off >= int64(len(got)) || got[off].Offset != off {
			t.Fatalf("canary offset %d acknowledged but not read back", off)
		}
	}
	// Nothing refused was stored.
	if end := endOffset(t, hostile, "hostile", 0); end != 1 {
		t.Errorf("hostile topic end offset %d, want 1", end)
	}
	for _, e := range logDirEntries(t, tb.Dir) {
		st, err := os.Stat(filepath.Join(tb.Dir, e))
		if err != nil || !st.IsDir() || slices.Contains(dirsBefore, e) || strings.HasPrefix(e, "slow-big-") || strings.HasPrefix(e, "__") {
			continue // the log dir's own files, the slow topic, internal topics
		}
		t.Errorf("directory %s appeared in the log dir for something the broker refused", e)
	}
	if got := logDirEntries(t, filepath.Join(tb.Dir, "hostile-0")); !slices.Equal(got, hostileFiles) {
		t.Errorf("hostile-0 holds %v after the refused batches, %v before", got, hostileFiles)
	}
	t.Logf("canary: %d records acknowledged and read back, %d read while the hostile cases ran, slowest acknowledgement %v",
		len(can.acked), can.read, can.maxWait)
}

// logDirEntries lists the names in a log dir.
func logDirEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}
