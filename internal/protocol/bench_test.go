package protocol

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// benchDataBytes is how much record data the fetch benchmarks serve per op.
func benchDataBytes() int64 {
	if os.Getenv("STRATA_LONG") == "1" {
		return 1 << 30
	}
	return 64 << 20
}

// fetchFixture is a broker + protocol server preloaded with one partition
// of 1 KiB records.
type fetchFixture struct {
	b     *broker.Broker
	srv   *Server
	addr  string
	bytes int64
	end   int64
}

func newFetchFixture(tb testing.TB, disableSendfile bool) *fetchFixture {
	tb.Helper()
	b := openTestBroker(tb, nil, "bench", 1)
	p, _ := b.Partition("bench", 0)
	val := make([]byte, 1024)
	rand.Read(val)
	var recs []record.Record
	for i := 0; i < 256; i++ { // 256 KiB batches
		recs = append(recs, record.Record{Value: val})
	}
	h := recordtest.NoProducer
	h.PartitionLeaderEpoch, h.BaseTimestamp = 0, time.Now().UnixMilli()
	batch := recordtest.Batch(h, recs...)
	batchBytes = int64(len(batch))
	var total int64
	for total < benchDataBytes() {
		if _, err := p.Append(context.Background(), append([]byte(nil), batch...), 1); err != nil {
			tb.Fatal(err)
		}
		total += int64(len(batch))
	}
	if err := p.Log.Flush(); err != nil {
		tb.Fatal(err)
	}
	srv, err := New(Config{Broker: b, Logger: testLogger(), DisableSendfile: disableSendfile})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv.Serve(ln)
	tb.Cleanup(func() { srv.Shutdown(context.Background()) })
	return &fetchFixture{b: b, srv: srv, addr: ln.Addr().String(), bytes: total, end: p.Log.HighWatermark()}
}

// fetchAll reads the whole partition with Fetch v12 requests of 8 MiB
// over c, discarding the bytes; it returns the record bytes seen.
func fetchAll(tb testing.TB, c net.Conn, br *bufio.Reader, end int64) int64 {
	var (
		offset int64
		total  int64
		corr   int32
		hdr    [4]byte
	)
	for offset < end {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.MaxBytes = fetchBytes
		req.SessionEpoch = -1
		t := kmsg.NewFetchRequestTopic()
		t.Topic = "bench"
		p := kmsg.NewFetchRequestTopicPartition()
		p.FetchOffset = offset
		p.PartitionMaxBytes = fetchBytes
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		corr++
		if _, err := c.Write(encodeFrame(req, corr)); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			tb.Fatal(err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[:]))
		// Read the framing up to the record bytes, then skip them.
		head := make([]byte, 128)
		m, err := io.ReadFull(br, head[:min(int64(len(head)), n)])
		if err != nil {
			tb.Fatal(err)
		}
		if err := discardN(br, n-int64(m)); err != nil {
			tb.Fatal(err)
		}
		// The records length (uvarint+1) follows the fixed v12 framing of
		// one topic "bench" with one partition.
		l, k := binary.Uvarint(head[recordsLenAt:m])
		if k <= 0 || l < 1 {
			tb.Fatalf("bad fetch response framing at offset %d", offset)
		}
		recBytes := int64(l - 1)
		if recBytes < batchBytes {
			tb.Fatalf("short fetch: %d bytes at offset %d", recBytes, offset)
		}
		total += recBytes
		offset += recBytes / batchBytes * 256
	}
	return total
}

// recordsLenAt is where the records length sits in a Fetch v12 response
// body for one topic "bench" with one partition.
const recordsLenAt = 4 + 1 + 4 + 2 + 4 + 1 + 6 + 1 + 4 + 2 + 8 + 8 + 8 + 1 + 4

// batchBytes is the size of one preloaded batch (256 records of 1 KiB).
var batchBytes int64

func encodeFrame(req kmsg.Request, corr int32) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 1)
	b = append(b, 'b')
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The benchmark client runs in a child process (this test binary
// re-executed) so that the parent's CPU time is the server's alone.
const (
	envClientAddr = "STRATA_BENCH_FETCH_ADDR"
	envClientEnd  = "STRATA_BENCH_FETCH_END"
	envClientN    = "STRATA_BENCH_FETCH_N"
	envClientBB   = "STRATA_BENCH_FETCH_BATCH"
	envClientRaw  = "STRATA_BENCH_RAW_ADDR"
)

// TestBenchFetchClient is the child-process fetch client; it is a no-op
// unless started by a benchmark.
func TestBenchFetchClient(t *testing.T) {
	if addr := os.Getenv(envClientRaw); addr != "" {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		drain(c)
		return
	}
	addr := os.Getenv(envClientAddr)
	if addr == "" {
		t.Skip("benchmark helper")
	}
	end, _ := strconv.ParseInt(os.Getenv(envClientEnd), 10, 64)
	n, _ := strconv.Atoi(os.Getenv(envClientN))
	batchBytes, _ = strconv.ParseInt(os.Getenv(envClientBB), 10, 64)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReaderSize(c, 1<<20)
	for i := 0; i < n; i++ {
		fetchAll(t, c, br, end)
	}
}

// runChild runs the test binary as a benchmark client with env.
func runChild(b *testing.B, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchFetchClient$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return cmd
}

func benchFetch(b *testing.B, disableSendfile bool) {
	fx := newFetchFixture(b, disableSendfile)
	// Warm the page cache and the code path once in-process.
	c, err := net.Dial("tcp", fx.addr)
	if err != nil {
		b.Fatal(err)
	}
	fetchAll(b, c, bufio.NewReaderSize(c, 1<<20), fx.end)
	c.Close()
	b.SetBytes(fx.bytes)
	b.ResetTimer()
	cpu0 := cpuTime()
	cmd := runChild(b, envClientAddr+"="+fx.addr, envClientEnd+"="+strconv.FormatInt(fx.end, 10),
		envClientN+"="+strconv.Itoa(b.N), envClientBB+"="+strconv.FormatInt(batchBytes, 10))
	if err := cmd.Wait(); err != nil {
		b.Fatalf("fetch client: %v", err)
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(cpu.Seconds()/(float64(fx.bytes)*float64(b.N)/(1<<30)), "server-cpu-s/GiB")
	calls, _ := fx.srv.SendfileCalls()
	if !disableSendfile && calls == 0 {
		b.Fatal("sendfile path not used")
	}
}

// BenchmarkFetchSendfile measures the broker's fetch path: Fetch requests
// over loopback, record bytes sent with sendfile, client discards.
func BenchmarkFetchSendfile(b *testing.B) { benchFetch(b, false) }

// BenchmarkFetchCopy is the same with the copy-through-user-space path.
func BenchmarkFetchCopy(b *testing.B) { benchFetch(b, true) }

// BenchmarkRawSendfile is the ceiling: sendfile(2) of a cached file to a
// loopback socket in 8 MiB calls, reader discards.
func BenchmarkRawSendfile(b *testing.B) {
	size := benchDataBytes()
	path := filepath.Join(b.TempDir(), "raw")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	rand.Read(buf)
	for w := int64(0); w < size; w += int64(len(buf)) {
		f.Write(buf)
	}
	f.Sync()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	child := runChild(b, envClientRaw+"="+ln.Addr().String())
	c, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	rc, _ := c.(*net.TCPConn).SyscallConn()
	send := func() {
		var off int64
		for off < size {
			_ = rc.Write(func(fd uintptr) bool {
				for off < size {
					_, err := unix.Sendfile(int(fd), int(f.Fd()), &off, int(min(8<<20, size-off)))
					if err == unix.EAGAIN {
						return false
					}
					if err != nil {
						b.Error(err)
						return true
					}
				}
				return true
			})
		}
	}
	send()
	b.SetBytes(size)
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		send()
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(cpu.Seconds()/(float64(size)*float64(b.N)/(1<<30)), "server-cpu-s/GiB")
	c.Close()
	_ = child.Wait()
}

// drain reads r to EOF into a reused 1 MiB buffer (the benchmark client).
func drain(r io.Reader) {
	buf := make([]byte, 1<<20)
	for {
		if _, err := r.Read(buf); err != nil {
			return
		}
	}
}

var discardBuf = make([]byte, 1<<20)

// discardN reads and drops n bytes with a 1 MiB buffer.
func discardN(r io.Reader, n int64) error {
	for n > 0 {
		m, err := r.Read(discardBuf[:min(n, int64(len(discardBuf)))])
		n -= int64(m)
		if err != nil && n > 0 {
			return err
		}
	}
	return nil
}

// fetchBytes is the max bytes of each benchmark Fetch request (the Java
// consumer's fetch.max.bytes default is 50 MiB).
const fetchBytes = 32 << 20
