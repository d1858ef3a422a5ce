package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frame builds a request frame: length, api key, version, correlation id,
// client id, (tag buffer when flexible) and body.
func frame(key, version int16, corr int32, flexibleHeader bool, body []byte) []byte {
	h := binary.BigEndian.AppendUint16(nil, uint16(key))
	h = binary.BigEndian.AppendUint16(h, uint16(version))
	h = binary.BigEndian.AppendUint32(h, uint32(corr))
	h = binary.BigEndian.AppendUint16(h, 3)
	h = append(h, "e2e"...)
	if flexibleHeader {
		h = append(h, 0)
	}
	h = append(h, body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(h))), h...)
}

// expectClose checks the broker closes c (EOF or reset) without answering.
func expectClose(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 64))
	switch {
	case err == nil:
		t.Errorf("%s: broker answered %d bytes instead of closing the connection", what, n)
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Errorf("%s: connection still open 10s later", what)
	}
}

// readFrame reads one response frame and returns its correlation id and
// the rest.
func readFrame(c net.Conn) (int32, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 4 || n > 1<<20 {
		return 0, nil, fmt.Errorf("response length %d", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// goodTraffic produces numbered records one at a time and consumes them
// back until stopped; it is the well-behaved client next to the bad bytes.
type goodTraffic struct {
	produced atomic.Int64
	consumed atomic.Int64
	mu       sync.Mutex
	errs     []string
}

func (g *goodTraffic) fail(format string, args ...any) {
	g.mu.Lock()
	g.errs = append(g.errs, fmt.Sprintf(format, args...))
	g.mu.Unlock()
}

func (g *goodTraffic) produce(ctx context.Context, cl *kgo.Client) {
	for i := 0; ctx.Err() == nil; i++ {
		err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("good-" + strconv.Itoa(i))}).FirstErr()
		if err != nil {
			if ctx.Err() == nil {
				g.fail("produce good-%d: %v", i, err)
			}
			return
		}
		g.produced.Add(1)
	}
}

func (g *goodTraffic) consume(ctx context.Context, cl *kgo.Client) {
	next := 0
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil && !errors.Is(err, context.Canceled) {
				g.fail("fetch: %v", err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if want := "good-" + strconv.Itoa(next); string(r.Value) != want {
				g.fail("consumed %q at offset %d, want %q", r.Value, r.Offset, want)
			}
			next++
			g.consumed.Add(1)
		})
	}
}

// TestBadBytesOnTheWire sends malformed frames on raw connections to the
// running binary while a kgo client produces and consumes without error.
func TestBadBytesOnTheWire(t *testing.T) {
	p := startBroker(t, t.TempDir())
	ctx := ctxFor(t, 2*time.Minute)
	adm := newAdmin(t, p.Kafka)
	if res, err := adm.CreateTopic(ctx, 1, 1, nil, "good"); err != nil || res.Err != nil {
		t.Fatalf("create good: %v %v", err, res.Err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.DefaultProduceTopic("good"))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.ConsumeTopics("good"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	g := &goodTraffic{}
	pctx, stopProd := context.WithCancel(ctx)
	cctx, stopCons := context.WithCancel(ctx)
	var pwg, cwg sync.WaitGroup
	pwg.Add(1)
	cwg.Add(1)
	go func() { defer pwg.Done(); g.produce(pctx, prod) }() // owner: this test; stopProd
	go func() { defer cwg.Done(); g.consume(cctx, cons) }() // owner: this test; stopCons
	defer func() { stopProd(); stopCons(); pwg.Wait(); cwg.Wait() }()
	for g.consumed.Load() < 10 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}

	meta := kmsg.NewPtrMetadataRequest()
	meta.Version = 4
	validMeta := frame(3, 4, 1, false, meta.AppendTo(nil))
	noise := make([]byte, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	closeCases := []struct {
		name      string
		bytes     []byte
		halfClose bool // the client stops sending mid-frame
	}{
		{"http request", []byte("GET / HTTP/1.1\r\nHost: strata\r\n\r\n"), false},
		{"random bytes", noise, false},
		{"truncated frame", validMeta[:len(validMeta)-5], true},
		{"length 2 GiB", append(binary.BigEndian.AppendUint32(nil, 1<<31), 0, 3, 0, 4), false},
		{"length 2 GiB - 1", append(binary.BigEndian.AppendUint32(nil, 1<<31-1), 0, 3, 0, 4), false},
		{"unknown api key", frame(0x7f7f, 0, 7, false, nil), false},
		{"frame shorter than a header", []byte{0, 0, 0, 3, 0, 3, 0}, false},
	}
	for _, tc := range closeCases {
		c, err := net.Dial("tcp", p.Kafka)
		if err != nil {
			t.Fatalf("%s: dial: %v", tc.name, err)
		}
		if _, err := c.Write(tc.bytes); err != nil {
			t.Errorf("%s: write: %v", tc.name, err)
		}
		if tc.halfClose {
			_ = c.(*net.TCPConn).CloseWrite()
		}
		expectClose(t, c, tc.name)
		c.Close()
		if !p.Alive() {
			t.Fatalf("broker died after %s:\n%s", tc.name, p.Log())
		}
	}
	if hwm := peakRSS(t, p.cmd.Process.Pid); hwm > 512<<20 {
		t.Errorf("broker peak RSS %d MiB after the 2 GiB length frames (must not allocate what the length claims)", hwm>>20)
	}

	t.Run("ApiVersions unsupported version", func(t *testing.T) { apiVersionsUnsupported(t, p.Kafka) })
	t.Run("corrupt batch", func(t *testing.T) { corruptBatch(t, ctx, p.Kafka) })

	// A half-open connection with a partial frame does not block others.
	idle, err := net.Dial("tcp", p.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := idle.Write(validMeta[:7]); err != nil {
		t.Fatal(err)
	}

	before := g.produced.Load()
	for g.produced.Load() < before+20 && ctx.Err() == nil && len(g.errs) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	stopProd()
	pwg.Wait()
	for g.consumed.Load() < g.produced.Load() && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	stopCons()
	cwg.Wait()
	t.Logf("good client: %d records produced and consumed while bad bytes were sent", g.produced.Load())
	if g.consumed.Load() != g.produced.Load() {
		t.Errorf("good client consumed %d of %d produced records", g.consumed.Load(), g.produced.Load())
	}
	if len(g.errs) > 0 {
		t.Errorf("good client errors:\n%s", strings.Join(g.errs, "\n"))
	}
}

// apiVersionsUnsupported checks Kafka's answer to an ApiVersions request of
// an unknown version: a v0 response with UNSUPPORTED_VERSION carrying the
// supported range of ApiVersions itself (Kafka's
// ApiVersionsRequest.getErrorResponse puts only that key in the error
// response), and the connection stays usable.
func apiVersionsUnsupported(t *testing.T, addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "e2e", "1.0"
	if _, err := c.Write(frame(18, 127, 42, true, req.AppendTo(nil))); err != nil {
		t.Fatal(err)
	}
	corr, body, err := readFrame(c)
	if err != nil {
		t.Fatalf("ApiVersions v127: no response: %v", err)
	}
	if corr != 42 {
		t.Errorf("correlation id %d, want 42", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("ApiVersions v127: response is not an ApiVersions v0 body: %v (% x)", err, body)
	}
	if resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Errorf("ApiVersions v127: error %d, want %d UNSUPPORTED_VERSION", resp.ErrorCode, kerr.UnsupportedVersion.Code)
	}
	ranges := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		ranges[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	if r, ok := ranges[18]; !ok || r[0] != 0 || r[1] < 3 {
		t.Errorf("ApiVersions range %v, want [0, >=3]", r)
	}
	// The client retries with v0 on the same connection, as Kafka clients do.
	v0 := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(frame(18, 0, 43, false, v0.AppendTo(nil))); err != nil {
		t.Fatal(err)
	}
	corr, body, err = readFrame(c)
	if err != nil {
		t.Fatalf("ApiVersions v0 after the v127 one: %v", err)
	}
	resp = kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(body); err != nil || corr != 43 || resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Errorf("ApiVersions v0 after v127: corr %d err %v code %d keys %d", corr, err, resp.ErrorCode, len(resp.ApiKeys))
	}
}

// peakRSS returns the process's VmHWM in bytes (0 if unknown).
func peakRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Logf("peak RSS unknown: %v", err)
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// corruptBatch produces a batch with a flipped byte (CRC mismatch) and one
// with a batch length that runs past the data: both must be refused with
// CORRUPT_MESSAGE and leave the partition unchanged; a valid batch after
// them lands at the next offset.
func corruptBatch(t *testing.T, ctx context.Context, addr string) {
	adm := newAdmin(t, addr)
	if res, err := adm.CreateTopic(ctx, 1, 1, nil, "corrupt"); err != nil || res.Err != nil {
		t.Fatalf("create corrupt: %v %v", err, res.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if c, _, err := rawProduce(ctx, cl, "corrupt", 0, [][]byte{payload(1)}); err != nil || c != 0 {
		t.Fatalf("valid produce: %d %v", c, err)
	}
	flipped := buildBatch([][]byte{payload(2), payload(3)})
	flipped[len(flipped)-10] ^= 0x01
	long := buildBatch([][]byte{payload(4)})
	binary.BigEndian.PutUint32(long[8:], uint32(len(long)-12+100))
	for name, batch := range map[string][]byte{"crc mismatch": flipped, "length past the data": long} {
		code, err := rawProduceBytes(ctx, cl, "corrupt", 0, batch)
		if err != nil {
			t.Errorf("%s: request failed: %v (a Kafka broker answers with an error code)", name, err)
			continue
		}
		if code != kerr.CorruptMessage.Code {
			t.Errorf("%s: error %d %v, want %d CORRUPT_MESSAGE", name, code, kerr.ErrorForCode(code), kerr.CorruptMessage.Code)
		}
	}
	c, base, err := rawProduce(ctx, cl, "corrupt", 0, [][]byte{payload(5)})
	if err != nil || c != 0 || base != 1 {
		t.Errorf("valid produce after the corrupt ones: code %d base %d err %v, want 0 at offset 1", c, base, err)
	}
	got := readAll(t, ctx, addr, "corrupt")[0]
	if len(got) != 2 || string(got[0].value) != string(payload(1)) || string(got[1].value) != string(payload(5)) {
		t.Errorf("corrupt topic holds %d records, want exactly the two valid ones", len(got))
	}
}
