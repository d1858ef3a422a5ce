package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/group"
	"github.com/strata-io/strata/internal/record"
)

// Hostile inputs, written byte by byte (Kafka's record batch v2 layout) so
// that they can be as wrong as a hostile client makes them. Shared by the
// per-bug tests and TestHostileCanary.

var hostileCRC = crc32.MakeTable(crc32.Castagnoli)

// hRecord encodes one record: offset delta, value, no key, no headers.
func hRecord(offsetDelta int64, value string) []byte {
	body := []byte{0}
	body = binary.AppendVarint(body, 0)
	body = binary.AppendVarint(body, offsetDelta)
	body = binary.AppendVarint(body, -1)
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// hBatch frames a records section (already compressed when codec != 0)
// with the given numRecords and lastOffsetDelta and a correct CRC.
func hBatch(codec int16, numRecords, lastOffsetDelta int32, records []byte) []byte {
	now := time.Now().UnixMilli()
	be := binary.BigEndian
	b := make([]byte, 61, 61+len(records))
	be.PutUint32(b[12:], 0xffffffff) // partition leader epoch
	b[16] = 2
	be.PutUint16(b[21:], uint16(codec))
	be.PutUint32(b[23:], uint32(lastOffsetDelta))
	be.PutUint64(b[27:], uint64(now))
	be.PutUint64(b[35:], uint64(now))
	be.PutUint64(b[43:], math.MaxUint64) // producer id -1
	be.PutUint16(b[51:], 0xffff)
	be.PutUint32(b[53:], 0xffffffff)
	be.PutUint32(b[57:], uint32(numRecords))
	b = append(b, records...)
	be.PutUint32(b[8:], uint32(len(b)-12))
	be.PutUint32(b[17:], crc32.Checksum(b[21:], hostileCRC))
	return b
}

// gzipBomb is a one-record gzip batch whose record inflates to 256 MiB of
// zeros: gzip members of 1 MiB of zeros, one after the other (a gzip
// stream may hold several members; readers concatenate them).
func gzipBomb(t testing.TB) []byte {
	t.Helper()
	member := func(p []byte) []byte {
		var out bytes.Buffer
		w, _ := gzip.NewWriterLevel(&out, gzip.BestCompression)
		w.Write(p)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	const mib = 1 << 20
	size := int64(256 * mib)
	hdr := []byte{0}
	hdr = binary.AppendVarint(hdr, 0)
	hdr = binary.AppendVarint(hdr, 0)
	hdr = binary.AppendVarint(hdr, -1)
	hdr = binary.AppendVarint(hdr, size)
	hdr = append(binary.AppendVarint(nil, int64(len(hdr))+size+1), hdr...)
	zeros := make([]byte, mib)
	out := member(append(hdr, zeros...))
	zm := member(zeros)
	for i := 1; i < 256; i++ {
		out = append(out, zm...)
	}
	out = append(out, member([]byte{0})...) // no headers
	return hBatch(1, 1, 0, out)
}

// hostileBatch is a produce payload and the error codes Kafka may answer.
type hostileBatch struct {
	name    string
	records []byte
	want    []int16
}

// hostileBatches are the record batches of issue 9 whose header disagrees
// with their records, and their relatives.
func hostileBatches(t testing.TB) []hostileBatch {
	three := append(append(hRecord(0, "a"), hRecord(1, "b")...), hRecord(2, "c")...)
	gz := func(raw []byte) []byte {
		z, err := record.Compress(record.Gzip, raw)
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	invalid := []int16{kerr.InvalidRecord.Code}
	corrupt := []int16{kerr.CorruptMessage.Code}
	crcBad := hBatch(0, 3, 2, three)
	crcBad[len(crcBad)-1] ^= 1
	return []hostileBatch{
		{"numRecords 5, lastOffsetDelta 4, 3 records", hBatch(0, 5, 4, three), invalid},
		{"numRecords MaxInt32", hBatch(0, math.MaxInt32, math.MaxInt32-1, three), invalid},
		{"records after the declared count", hBatch(0, 2, 1, three), invalid},
		{"offset deltas out of order", hBatch(0, 3, 2, append(append(hRecord(0, "a"), hRecord(2, "b")...), hRecord(1, "c")...)), invalid},
		{"record length beyond the batch", hBatch(0, 1, 0, append(binary.AppendVarint(nil, 5000), hRecord(0, "x")[1:]...)), invalid},
		{"gzip: numRecords 5, 3 records", hBatch(1, 5, 4, gz(three)), invalid},
		{"gzip: offset deltas out of order", hBatch(1, 2, 1, gz(append(hRecord(1, "a"), hRecord(0, "b")...))), invalid},
		{"gzip: not gzip", hBatch(1, 3, 2, three), corrupt},
		{"gzip bomb (256 MiB)", gzipBomb(t), invalid},
		{"bad CRC", crcBad, corrupt},
		{"numRecords != lastOffsetDelta+1", hBatch(0, 3, 7, three), invalid},
	}
}

// endOffset is the partition's log end offset (ListOffsets latest).
func endOffset(t *testing.T, cl *kgo.Client, topic string, partition int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("ListOffsets %s-%d: %v %+v", topic, partition, err, resp)
	}
	return resp.Topics[0].Partitions[0].Offset
}

func codeIn(c int16, want []int16) bool {
	for _, w := range want {
		if c == w {
			return true
		}
	}
	return false
}

// TestProduceHostileBatches: batches whose header disagrees with their
// records are refused with Kafka's code over the wire, the partition's end
// offset does not move, and what was stored before and after reads back
// unchanged.
func TestProduceHostileBatches(t *testing.T) {
	tb := startBroker(t, "", nil)
	cl := tb.Client()
	if _, err := tb.Admin().CreateTopic(ctxT(t), 1, 1, nil, "hostile"); err != nil {
		t.Fatal(err)
	}
	if r := produceRaw(t, cl, "hostile", hBatch(0, 1, 0, hRecord(0, "before"))); r.ErrorCode != 0 {
		t.Fatalf("good produce: %d", r.ErrorCode)
	}
	for _, h := range hostileBatches(t) {
		r := produceRaw(t, cl, "hostile", h.records)
		if !codeIn(r.ErrorCode, h.want) {
			t.Errorf("%s: error %d (%v), want one of %v", h.name, r.ErrorCode, kerr.ErrorForCode(r.ErrorCode), h.want)
		}
		if end := endOffset(t, cl, "hostile", 0); end != 1 {
			t.Fatalf("%s: end offset %d after a refused batch, want 1", h.name, end)
		}
	}
	// A request of a good and a bad batch stores neither (all or nothing).
	mixed := append(hBatch(0, 1, 0, hRecord(0, "lost")), hBatch(0, 5, 4, hRecord(0, "x"))...)
	if r := produceRaw(t, cl, "hostile", mixed); r.ErrorCode != kerr.InvalidRecord.Code {
		t.Errorf("good+bad batches: error %d, want INVALID_RECORD", r.ErrorCode)
	}
	if r := produceRaw(t, cl, "hostile", hBatch(0, 1, 0, hRecord(0, "after"))); r.ErrorCode != 0 || r.BaseOffset != 1 {
		t.Fatalf("good produce after the hostile ones: error %d at offset %d, want offset 1", r.ErrorCode, r.BaseOffset)
	}
	got := consumeAll(t, tb, "hostile", 2)
	if len(got) != 2 || string(got[0].Value) != "before" || string(got[1].Value) != "after" || got[1].Offset != 1 {
		t.Fatalf("read back %d records: %v", len(got), got)
	}
}

// rawRoundTrip sends req on c (correlation id corr) and decodes the answer
// into a response of req's kind. ApiVersions answers carry no header tags
// whatever their version (KIP-511).
func rawRoundTrip(c net.Conn, req kmsg.Request, corr int32) (kmsg.Response, error) {
	if _, err := c.Write(rawRequest(req, corr)); err != nil {
		return nil, err
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:] // empty tagged fields of response header v1
	}
	return resp, resp.ReadFrom(body)
}

// badSoftwareNames are client software names/versions Kafka refuses.
func badSoftwareNames() map[string]string {
	junk := make([]byte, 2000)
	r := rand.New(rand.NewPCG(9, 9))
	for i := range junk {
		junk[i] = byte(r.Uint32())
	}
	return map[string]string{
		"control bytes":     "kgo\x00\x01",
		"invalid UTF-8":     "kgo\xff\xfe",
		"empty":             "",
		"leading '-'":       "-kgo",
		"trailing '.'":      "kgo.",
		"space":             "my client",
		"2000 random bytes": string(junk),
		"non-ASCII letter":  "k\u00e9o",
	}
}

// TestApiVersionsSoftwareName: ApiVersions v3+ with a client software name
// or version outside Kafka's pattern is answered INVALID_REQUEST (42) with
// no keys, on a connection that stays usable; valid ones get the keys.
func TestApiVersionsSoftwareName(t *testing.T) {
	tb := startBroker(t, "", nil)
	c, err := net.Dial("tcp", tb.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	corr := int32(0)
	ask := func(name, version string) *kmsg.ApiVersionsResponse {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, name, version
		corr++
		resp, err := rawRoundTrip(c, req, corr)
		if err != nil {
			t.Fatalf("ApiVersions %q %q: %v", name, version, err)
		}
		return resp.(*kmsg.ApiVersionsResponse)
	}
	for what, bad := range badSoftwareNames() {
		for _, r := range []*kmsg.ApiVersionsResponse{ask(bad, "1.0.0"), ask("kgo", bad)} {
			if r.ErrorCode != kerr.InvalidRequest.Code || len(r.ApiKeys) != 0 {
				t.Errorf("%s: error %d with %d keys, want INVALID_REQUEST and none", what, r.ErrorCode, len(r.ApiKeys))
			}
		}
	}
	for _, good := range [][2]string{{"kgo", "v1.22.3"}, {"confluent-kafka-python", "2.3.0-rdkafka-2.3.0"}, {"a", "1"}, {"apache-kafka-java", "3.9.0"}} {
		if r := ask(good[0], good[1]); r.ErrorCode != 0 || len(r.ApiKeys) == 0 {
			t.Errorf("%q %q: error %d with %d keys", good[0], good[1], r.ErrorCode, len(r.ApiKeys))
		}
	}
	// Below v3 there are no such fields to check.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 2
	corr++
	if resp, err := rawRoundTrip(c, req, corr); err != nil || resp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
		t.Errorf("ApiVersions v2: %v %+v", err, resp)
	}
}

// partitionDirs lists the partition directories of topic in the log dir.
func partitionDirs(t *testing.T, dir, topic string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, topic+"-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// createTopicsRaw sends one CreateTopics request of topics (name ->
// partitions) and returns each topic's error code.
func createTopicsRaw(t *testing.T, cl *kgo.Client, validateOnly bool, topics map[string]int32) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 60000
	req.ValidateOnly = validateOnly
	for name, n := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, 1
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctxT(t), cl)
	if err != nil {
		t.Fatalf("CreateTopics: %v", err)
	}
	out := map[string]int16{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = rt.ErrorCode
	}
	return out
}

// TestCreateTopicsBounds: a CreateTopics request asking for more than
// Kafka's 10,000 partitions (or metadata records) is refused as a whole
// with POLICY_VIOLATION before anything is created: no directory appears.
func TestCreateTopicsBounds(t *testing.T) {
	tb := startBroker(t, "", nil)
	cl := tb.Client()
	for _, tc := range []struct {
		name     string
		validate bool
		topics   map[string]int32
	}{
		{"one million partitions", false, map[string]int32{"huge": 1_000_000}},
		{"10,001 partitions over two topics", false, map[string]int32{"huge-a": 5000, "huge-b": 5001}},
		{"10,000 partitions and a topic record", true, map[string]int32{"huge-c": 10_000}},
		{"MaxInt32 partitions next to a small topic", false, map[string]int32{"huge-d": math.MaxInt32, "small-ok": 1}},
	} {
		codes := createTopicsRaw(t, cl, tc.validate, tc.topics)
		for name := range tc.topics {
			if codes[name] != kerr.PolicyViolation.Code {
				t.Errorf("%s: topic %s error %d, want POLICY_VIOLATION", tc.name, name, codes[name])
			}
			if dirs := partitionDirs(t, tb.Dir, name); len(dirs) > 0 {
				t.Errorf("%s: %d directories of refused topic %s on disk", tc.name, len(dirs), name)
			}
		}
	}
	// Within the bounds (validate only: nothing is created either).
	if codes := createTopicsRaw(t, cl, true, map[string]int32{"big-ok": 9_999}); codes["big-ok"] != 0 {
		t.Errorf("validate 9,999 partitions: error %d", codes["big-ok"])
	}
	if dirs := partitionDirs(t, tb.Dir, "big-ok"); len(dirs) > 0 {
		t.Errorf("validate-only left %d directories", len(dirs))
	}
	// CreatePartitions: more than 10,000 new partitions in one request.
	if codes := createTopicsRaw(t, cl, false, map[string]int32{"grow": 1}); codes["grow"] != 0 {
		t.Fatalf("create grow: %d", codes["grow"])
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.TimeoutMillis = 60000
	ct := kmsg.NewCreatePartitionsRequestTopic()
	ct.Topic, ct.Count = "grow", 20_000
	cp.Topics = append(cp.Topics, ct)
	resp, err := cp.RequestWith(ctxT(t), cl)
	if err != nil || resp.Topics[0].ErrorCode != kerr.PolicyViolation.Code {
		t.Errorf("CreatePartitions to 20,000: %v %+v", err, resp)
	}
	if dirs := partitionDirs(t, tb.Dir, "grow"); len(dirs) != 1 {
		t.Errorf("grow has %d partition directories after a refused CreatePartitions, want 1", len(dirs))
	}
}

// TestSlowCreateTopicsBlocksNobody: while one CreateTopics request creates
// hundreds of partitions, other clients' admin requests (DeleteTopics of
// an unknown topic, CreateTopics of a small topic, InitProducerId) and
// produce/fetch are answered: each of them completes before the big
// creation does.
func TestSlowCreateTopicsBlocksNobody(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	other := tb.Client(kgo.DefaultProduceTopic("busy"), kgo.AllowAutoTopicCreation())
	if err := other.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	bigDone := make(chan map[string]int16, 1)
	go func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(tb.Addr()))
		if err != nil {
			bigDone <- nil
			return
		}
		defer cl.Close()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 300000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "slow-big", 500, 1
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), cl)
		if err != nil {
			bigDone <- nil
			return
		}
		bigDone <- map[string]int16{"slow-big": resp.Topics[0].ErrorCode}
	}()
	// Wait until the big creation is under way (its first directories).
	for len(partitionDirs(t, tb.Dir, "slow-big")) == 0 {
		select {
		case <-bigDone:
			t.Fatal("the big creation ended before it was seen under way")
		case <-time.After(5 * time.Millisecond):
		}
	}
	steps := []struct {
		name string
		run  func() error
	}{
		{"DeleteTopics of an unknown topic", func() error {
			req := kmsg.NewPtrDeleteTopicsRequest()
			rt := kmsg.NewDeleteTopicsRequestTopic()
			name := "no-such-topic"
			rt.Topic = &name
			req.Topics = append(req.Topics, rt)
			req.TopicNames = []string{name}
			resp, err := req.RequestWith(ctx, other)
			if err == nil && resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				err = fmt.Errorf("error %d", resp.Topics[0].ErrorCode)
			}
			return err
		}},
		{"CreateTopics of a small topic", func() error {
			if c := createTopicsRaw(t, other, false, map[string]int32{"small-during": 1}); c["small-during"] != 0 {
				return fmt.Errorf("error %d", c["small-during"])
			}
			return nil
		}},
		{"InitProducerId", func() error {
			resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, other)
			if err == nil && resp.ErrorCode != 0 {
				err = fmt.Errorf("error %d", resp.ErrorCode)
			}
			return err
		}},
		{"produce", func() error {
			return other.ProduceSync(ctx, &kgo.Record{Value: []byte("during")}).FirstErr()
		}},
		{"fetch", func() error {
			got := consumeAll(t, tb, "busy", 2)
			if string(got[1].Value) != "during" {
				return fmt.Errorf("read %q", got[1].Value)
			}
			return nil
		}},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Errorf("%s during the big creation: %v", s.name, err)
		}
		select {
		case <-bigDone:
			t.Fatalf("%s was answered only after the big creation ended", s.name)
		default:
		}
	}
	if codes := <-bigDone; codes == nil || codes["slow-big"] != 0 {
		t.Fatalf("big creation: %v", codes)
	}
}

// wideProduce is one acks=1 Produce request naming n partitions of topic
// (most of which do not exist), one small batch each.
func wideProduce(topic string, n int32) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	for i := int32(0); i < n; i++ {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition = i
		rp.Records = hBatch(0, 1, 0, hRecord(0, "wide"))
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// TestProduceBoundedConcurrency: a Produce request naming 10,000
// partitions is answered for all of them without the broker running a
// goroutine per partition (it used to: thousands at once).
func TestProduceBoundedConcurrency(t *testing.T) {
	tb := startBroker(t, "", nil)
	cl := tb.Client()
	if _, err := tb.Admin().CreateTopic(ctxT(t), 4, 1, nil, "wide"); err != nil {
		t.Fatal(err)
	}
	req := wideProduce("wide", 10_000)
	base := runtime.NumGoroutine()
	var peak atomic.Int64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(runtime.NumGoroutine()); n > peak.Load() {
				peak.Store(n)
			}
			runtime.Gosched()
		}
	}()
	resp, err := req.RequestWith(ctxT(t), cl)
	close(stop)
	<-stopped
	if err != nil {
		t.Fatal(err)
	}
	ok, unknown := 0, 0
	for _, p := range resp.Topics[0].Partitions {
		switch p.ErrorCode {
		case 0:
			ok++
		case kerr.UnknownTopicOrPartition.Code:
			unknown++
		}
	}
	if ok != 4 || unknown != 10_000-4 {
		t.Errorf("%d partitions appended, %d unknown; want 4 and %d", ok, unknown, 10_000-4)
	}
	if grew := peak.Load() - int64(base); grew > 100 {
		t.Errorf("goroutines grew by %d while the broker handled one request of 10,000 partitions", grew)
	}
	t.Logf("goroutines: %d before, at most %d during the request", base, peak.Load())
}

// TestDurableAcksFalseKeepsCoordinatorRecordsDurable: with
// strata.durable.acks=false an acks=all produce is answered before its
// data is fsynced (the documented trade), but the coordinators' own
// records are fsynced before they are answered: group offsets and
// metadata in __consumer_offsets, transaction state in
// __transaction_state, and the transaction markers.
func TestDurableAcksFalseKeepsCoordinatorRecordsDurable(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"strata.durable.acks": "false"})
	ctx := ctxT(t)
	adm := tb.Admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "nd"); err != nil {
		t.Fatal(err)
	}
	synced := func(topic string, partition int32) (rp, leo int64) {
		t.Helper()
		p, err := tb.Server().Broker().Partition(topic, partition)
		if err != nil {
			t.Fatal(err)
		}
		return p.Log.RecoveryPoint(), p.Log.LogEndOffset()
	}
	// The data side: acknowledged, not (yet) fsynced.
	cl := tb.Client(kgo.DefaultProduceTopic("nd"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("fast")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if rp, leo := synced("nd", 0); rp >= leo {
		t.Errorf("data partition: recovery point %d, end %d: strata.durable.acks=false should answer before fsync", rp, leo)
	}
	// The coordinator side: offsets (and the group's metadata record).
	group := "nd-group"
	gp := group2Partition(group)
	offs := make(kadm.Offsets)
	offs.Add(kadm.Offset{Topic: "nd", Partition: 0, At: 1, LeaderEpoch: -1})
	if resp, err := adm.CommitOffsets(ctx, group, offs); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	if rp, leo := synced("__consumer_offsets", gp); rp < leo || leo == 0 {
		t.Errorf("__consumer_offsets-%d: recovery point %d below end %d after an acknowledged commit", gp, rp, leo)
	}
	// A transaction: its state and its markers.
	tx := tb.Client(kgo.DefaultProduceTopic("nd"), kgo.TransactionalID("nd-tx"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("in txn")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// EndTxn is answered once PrepareCommit is durable; the markers and
	// CompleteCommit follow in the background (as Kafka), each fsynced
	// before the transaction completes: wait for the completion, then
	// check that everything it wrote is fsynced.
	eventually(t, "transaction completed", func() error {
		ds, err := adm.DescribeTransactions(ctx, "nd-tx")
		if err != nil {
			return err
		}
		if d := ds["nd-tx"]; d.Err != nil || d.State != "CompleteCommit" {
			return fmt.Errorf("state %q (%v)", d.State, d.Err)
		}
		return nil
	})
	for p := int32(0); p < 2; p++ {
		if rp, leo := synced("__transaction_state", p); rp < leo {
			t.Errorf("__transaction_state-%d: recovery point %d below end %d after a committed transaction", p, rp, leo)
		}
	}
	if rp, leo := synced("nd", 0); rp < leo {
		t.Errorf("data partition: recovery point %d below end %d: the commit marker was not fsynced", rp, leo)
	}
}

// group2Partition is the __consumer_offsets partition of a group (the
// test brokers have 2).
func group2Partition(id string) int32 { return group.PartitionFor(id, 2) }
