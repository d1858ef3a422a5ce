package compat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// opTimeout bounds one client operation (a bounded wait, not an assertion).
const opTimeout = 60 * time.Second

// Kafka error codes the scenarios expect.
const (
	codeUnknownTopic  = 3
	codeInvalidConfig = 40
	codeInvalidRecord = 87
	codeTooLarge      = 10
	codeBatchTooLarge = 18
)

// suite runs every scenario a client supports against one broker.
type suite struct {
	b *testBroker
	c *Client
	// expected is what each topic must hold, checked again after restart.
	expected map[string][]Rec
	// configs are topic overrides that must survive a restart.
	configs map[string]map[string]string
}

func runSuite(t *testing.T, c *Client) {
	// kafkajs can only fetch through a consumer group: skip Kafka's 3 s
	// initial-rebalance delay for the fresh group of every kafkajs fetch (the
	// group tests keep the default).
	b := startBroker(t, brokerOpts{extra: map[string]string{"group.initial.rebalance.delay.ms": "0"}})
	s := &suite{b: b, c: c, expected: map[string][]Rec{}, configs: map[string]map[string]string{}}
	t.Logf("client %s versions %v codecs %v", c.Name, c.Versions, c.Codecs)
	t.Run("CreateTopicWithConfigs", s.createTopicWithConfigs)
	t.Run("CreateTopicBadConfig", s.createTopicBadConfig)
	for _, codec := range c.Codecs {
		t.Run("ProduceConsume/"+codec, func(t *testing.T) { s.produceConsume(t, codec) })
	}
	t.Run("ManySegments", s.manySegments)
	t.Run("AlterConfigs", s.alterConfigs)
	t.Run("DeleteRecords", s.deleteRecords)
	t.Run("CompactRejectsUnkeyed", s.compactRejectsUnkeyed)
	t.Run("MaxMessageBytes", s.maxMessageBytes)
	t.Run("LogAppendTime", s.logAppendTime)
	t.Run("TopicCompressionType", s.topicCompressionType)
	t.Run("IdempotentProducer", s.idempotent)
	t.Run("RestartReadBack", s.restartReadBack)
	t.Run("DeleteTopic", s.deleteTopic)
}

func (s *suite) need(t *testing.T, ops ...string) {
	t.Helper()
	for _, op := range ops {
		if !s.c.can(op) {
			t.Skipf("%s does not support %s", s.c.Name, op)
		}
	}
}

// createTopic creates a topic with the client when it can, else with kadm.
func (s *suite) createTopic(t *testing.T, name string, partitions int32, configs map[string]string) {
	t.Helper()
	if s.c.can(opCreate) {
		s.c.Must(t, s.b.Addr(), Op{Op: opCreate, Topic: name, Partitions: partitions, Configs: configs})
	} else {
		adminCreate(t, s.b, name, partitions, configs)
	}
	waitTopic(t, s.b, name, partitions)
}

func adminCreate(t testing.TB, b *testBroker, name string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = strp(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	r, err := b.Admin(t).CreateTopic(ctx, partitions, 1, cfg, name)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("kadm create %s: %v", name, err)
	}
}

// waitTopic waits until metadata shows the topic with its partitions led.
func waitTopic(t testing.TB, b *testBroker, name string, partitions int32) {
	t.Helper()
	adm := b.Admin(t)
	waitFor(t, "topic "+name+" in metadata", 20*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		td, err := adm.ListTopics(ctx, name)
		if err != nil {
			return err
		}
		d, ok := td[name]
		if !ok || d.Err != nil {
			return fmt.Errorf("missing: %v", d.Err)
		}
		if int32(len(d.Partitions)) != partitions {
			return fmt.Errorf("has %d partitions, want %d", len(d.Partitions), partitions)
		}
		return nil
	})
}

// topicExists asks kadm whether a topic exists.
func topicExists(t testing.TB, b *testBroker, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	td, err := b.Admin(t).ListTopics(ctx)
	if err != nil {
		t.Fatalf("kadm list topics: %v", err)
	}
	return td.Has(name)
}

// adminConfigs describes a topic with kadm: value and source per name.
func adminConfigs(t testing.TB, b *testBroker, topic string) map[string]kadm.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	rcs, err := b.Admin(t).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("kadm describe %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatalf("kadm describe %s: %v", topic, err)
	}
	out := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		out[c.Key] = c
	}
	return out
}

// describe returns topic configs through the client (or kadm if it can't).
func (s *suite) describe(t *testing.T, topic string) map[string]string {
	t.Helper()
	if s.c.can(opDescribe) {
		return s.c.Must(t, s.b.Addr(), Op{Op: opDescribe, Topic: topic}).Configs
	}
	out := map[string]string{}
	for k, c := range adminConfigs(t, s.b, topic) {
		out[k] = c.MaybeValue()
	}
	return out
}

func checkConfigs(t *testing.T, who string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: config %s = %q, want %q", who, k, got[k], v)
		}
	}
}

func (s *suite) createTopicWithConfigs(t *testing.T) {
	s.need(t, opCreate)
	cfg := map[string]string{"retention.ms": "3600000", "max.message.bytes": "2000000", "cleanup.policy": "delete", "segment.bytes": "1048576"}
	s.createTopic(t, "cfg-topic", 3, cfg)
	got := s.describe(t, "cfg-topic")
	checkConfigs(t, s.c.Name+" describe", got, cfg)
	// Settings left alone are described with Kafka's defaults.
	checkConfigs(t, s.c.Name+" describe defaults", got, map[string]string{"segment.ms": "604800000", "min.compaction.lag.ms": "0"})
	for k, c := range adminConfigs(t, s.b, "cfg-topic") {
		if _, ok := cfg[k]; ok && c.Source != kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("kadm describe: %s source %v, want DYNAMIC_TOPIC_CONFIG", k, c.Source)
		}
	}
	s.configs["cfg-topic"] = cfg
}

func (s *suite) createTopicBadConfig(t *testing.T) {
	s.need(t, opCreate)
	bad := []map[string]string{
		{"retention.ms": "not-a-number"},
		{"cleanup.policy": "bogus"},
		{"no.such.config": "1"},
	}
	for i, cfg := range bad {
		name := fmt.Sprintf("bad-topic-%d", i)
		r := s.c.Do(t, s.b.Addr(), Op{Op: opCreate, Topic: name, Partitions: 1, Configs: cfg})
		if r.ErrorCode != codeInvalidConfig {
			t.Errorf("create %s with %v: error code %d (%s), want INVALID_CONFIG (40)", name, cfg, r.ErrorCode, r.Error)
		}
		if topicExists(t, s.b, name) {
			t.Errorf("create %s with %v was rejected but the topic exists", name, cfg)
		}
	}
}

// sampleRecords are the records every client produces: keyed, unkeyed and
// tombstones, then a compressible bulk run.
func sampleRecords(base int64, bulk int) []Rec {
	recs := []Rec{
		{Key: strp("user-1"), Value: strp("v1")},
		{Key: nil, Value: strp("unkeyed-1")},
		{Key: strp("user-2"), Value: nil},
		{Key: strp("user-1"), Value: strp("v2")},
		{Key: nil, Value: strp("unkeyed-2")},
		{Key: strp("kéy-ü"), Value: strp("värde ✓")},
		{Key: nil, Value: nil},
	}
	for i := 0; i < bulk; i++ {
		recs = append(recs, Rec{Key: strp(fmt.Sprintf("bulk-%04d", i)),
			Value: strp(fmt.Sprintf("bulk value %04d %s", i, strings.Repeat("compressible ", 12)))})
	}
	recs[0].Headers = [][2]string{{"trace-id", "abc-123"}, {"content-type", "text/plain"}}
	recs[3].Headers = [][2]string{{"trace-id", "déf-456"}}
	for i := range recs {
		recs[i].Timestamp = base + int64(i)*1000
		recs[i].Offset = int64(i)
	}
	return recs
}

// checkRecords compares fetched records with want (keys, values, offsets and,
// when the client set them, timestamps).
func checkRecords(t *testing.T, who string, got, want []Rec, timestamps bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d records, want %d", who, len(got), len(want))
	}
	bad := 0
	for i := 0; i < len(got) && i < len(want); i++ {
		g, w := got[i], want[i]
		ok := eqp(g.Key, w.Key) && eqp(g.Value, w.Value) && g.Offset == w.Offset && g.Partition == w.Partition
		if timestamps && g.Timestamp != w.Timestamp {
			ok = false
		}
		if w.Headers != nil && fmt.Sprint(g.Headers) != fmt.Sprint(w.Headers) {
			ok = false
		}
		if !ok {
			if bad++; bad <= 5 {
				t.Errorf("%s: record %d = %v, want %v", who, i, g, w)
			}
		}
	}
}

func eqp(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// adapt drops what the client cannot produce from sample records (headers,
// a record with null key and null value) and renumbers the offsets.
func (s *suite) adapt(recs []Rec) []Rec {
	out := recs[:0]
	for _, r := range recs {
		if !s.c.can(opHeaders) {
			r.Headers = nil
		}
		if r.Key == nil && r.Value == nil && !s.c.can(opNullRecord) {
			continue
		}
		r.Offset = int64(len(out))
		out = append(out, r)
	}
	return out
}

func (s *suite) produce(t *testing.T, op Op) []int64 {
	t.Helper()
	op.Op = opProduce
	r := s.c.Must(t, s.b.Addr(), op)
	return r.Offsets
}

func (s *suite) fetch(t *testing.T, topic string, partition int32, from int64, n int) []Rec {
	t.Helper()
	return s.c.Must(t, s.b.Addr(), Op{Op: opFetch, Topic: topic, Partition: partition, Offset: from, Max: n}).Records
}

func (s *suite) produceConsume(t *testing.T, codec string) {
	topic := "data-" + codec
	s.createTopic(t, topic, 1, nil)
	base := time.Now().Add(-time.Hour).UnixMilli()
	want := sampleRecords(base, 200)
	ts := s.c.can(opTimestamps)
	want = s.adapt(want)
	in := make([]Rec, len(want))
	copy(in, want)
	if !ts {
		for i := range in {
			in[i].Timestamp = 0
		}
	}
	offs := s.produce(t, Op{Topic: topic, Records: in, Compression: codec})
	for i, o := range offs {
		if o >= 0 && o != int64(i) {
			t.Errorf("produce: record %d acknowledged at offset %d", i, o)
			break
		}
	}

	got := s.fetch(t, topic, 0, -2, len(want))
	checkRecords(t, "fetch from beginning", got, want, ts)
	if !ts {
		for i := range want {
			if i < len(got) {
				want[i].Timestamp = got[i].Timestamp
			}
		}
	}
	s.expected[topic] = want

	got = s.fetch(t, topic, 0, 3, len(want)-3)
	checkRecords(t, "fetch from offset 3", got, want[3:], ts)

	if s.c.can(opWatermarks) {
		r := s.c.Must(t, s.b.Addr(), Op{Op: opWatermarks, Topic: topic})
		if r.Low != 0 || r.High != int64(len(want)) {
			t.Errorf("watermarks low %d high %d, want 0 %d", r.Low, r.High, len(want))
		}
	}

	if s.c.can(opOffsetForTime) {
		target := want[3].Timestamp
		wantOff := int64(3)
		if ts {
			target -= 500 // between records 2 and 3
		} else {
			for wantOff > 0 && want[wantOff-1].Timestamp >= target {
				wantOff--
			}
		}
		r := s.c.Must(t, s.b.Addr(), Op{Op: opOffsetForTime, Topic: topic, Timestamp: target})
		if r.Offset != wantOff {
			t.Errorf("offset for timestamp %d = %d, want %d", target, r.Offset, wantOff)
		} else {
			got = s.fetch(t, topic, 0, r.Offset, len(want)-int(wantOff))
			checkRecords(t, "fetch from timestamp", got, want[wantOff:], ts)
		}
	}

	checkCodec(t, s.b, topic, codec, len(want))
}

// checkCodec reads the topic with franz-go and checks the last (bulk) batch
// is served with the codec it was produced with. librdkafka <= 2.11 only
// compresses with gzip, snappy or lz4 when the broker advertises Produce
// v0, which Strata does for that reason.
func checkCodec(t *testing.T, b *testBroker, topic, codec string, n int) {
	t.Helper()
	recs := kgoFetch(t, b, topic, 0, kgo.NewOffset().AtStart(), n)
	if len(recs) != n {
		t.Errorf("franz-go read %d records, want %d", len(recs), n)
		return
	}
	wantType := map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[codec]
	if got := recs[n-1].Attrs.CompressionType(); got != wantType {
		seen := map[uint8]int{}
		for _, r := range recs {
			seen[r.Attrs.CompressionType()]++
		}
		t.Errorf("last batch served with compression type %d, want %d (%s); records per type %v", got, wantType, codec, seen)
	}
}

// kgoFetch reads n records of one partition with franz-go.
func kgoFetch(t testing.TB, b *testBroker, topic string, partition int32, at kgo.Offset, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: at}}))
	if err != nil {
		t.Fatalf("kgo client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		for _, e := range fs.Errors() {
			t.Errorf("kgo fetch %s: %v", topic, e.Err)
			return out
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// manySegments spreads records over many small segments and reads them back
// across segment boundaries, from an offset and from a timestamp inside a
// later segment; a batch larger than segment.bytes is rejected.
func (s *suite) manySegments(t *testing.T) {
	topic := "segments-topic"
	s.createTopic(t, topic, 1, map[string]string{"segment.bytes": "4096"})
	base := time.Now().Add(-30 * time.Minute).UnixMilli()
	ts := s.c.can(opTimestamps)
	var want []Rec
	for call := 0; call < 6; call++ {
		var in []Rec
		for i := 0; i < 20; i++ {
			n := call*20 + i
			r := Rec{Key: strp(fmt.Sprintf("seg-key-%03d", n)), Value: strp(fmt.Sprintf("segment record %03d %s", n, strings.Repeat("s", 100))),
				Offset: int64(n), Timestamp: base + int64(n)*1000}
			want = append(want, r)
			if !ts {
				r.Timestamp = 0
			}
			in = append(in, r)
		}
		s.produce(t, Op{Topic: topic, Records: in, Compression: "none"})
	}
	got := s.fetch(t, topic, 0, -2, len(want))
	checkRecords(t, "many segments from beginning", got, want, ts)
	if !ts {
		for i := range want {
			if i < len(got) {
				want[i].Timestamp = got[i].Timestamp
			}
		}
	}
	s.expected[topic] = want
	got = s.fetch(t, topic, 0, 77, len(want)-77)
	checkRecords(t, "many segments from offset 77", got, want[77:], ts)
	if s.c.can(opOffsetForTime) {
		target := want[101].Timestamp
		wantOff := int64(101)
		for wantOff > 0 && want[wantOff-1].Timestamp >= target {
			wantOff--
		}
		if r := s.c.Must(t, s.b.Addr(), Op{Op: opOffsetForTime, Topic: topic, Timestamp: target}); r.Offset != wantOff {
			t.Errorf("offset for timestamp %d in a later segment = %d, want %d", target, r.Offset, wantOff)
		}
	}
	var big []Rec
	for i := 0; i < 60; i++ {
		big = append(big, Rec{Key: strp(fmt.Sprintf("big-%d", i)), Value: strp(strings.Repeat("b", 150))})
	}
	r := s.c.Do(t, s.b.Addr(), Op{Op: opProduce, Topic: topic, Records: big, Compression: "none"})
	if r.ErrorCode != codeBatchTooLarge {
		t.Errorf("batch of ~10 KB to segment.bytes=4096 topic: code %d (%s), want RECORD_BATCH_TOO_LARGE (18)", r.ErrorCode, r.Error)
	}
}

func (s *suite) alterConfigs(t *testing.T) {
	s.need(t, opDescribe)
	if !s.c.can(opAlterIncr) && !s.c.can(opAlterLegacy) {
		t.Skipf("%s alters no configs", s.c.Name)
	}
	topic := "alter-topic"
	s.createTopic(t, topic, 1, map[string]string{"max.message.bytes": "2000000"})
	addr := s.b.Addr()
	if s.c.can(opAlterIncr) {
		s.c.Must(t, addr, Op{Op: opAlterIncr, Topic: topic, Configs: map[string]string{"retention.ms": "7200000"}})
		checkConfigs(t, "after incremental alter", s.describe(t, topic),
			map[string]string{"retention.ms": "7200000", "max.message.bytes": "2000000"})
		r := s.c.Do(t, addr, Op{Op: opAlterIncr, Topic: topic, Configs: map[string]string{"cleanup.policy": "bogus"}})
		if r.ErrorCode != codeInvalidConfig {
			t.Errorf("incremental alter cleanup.policy=bogus: code %d (%s), want 40", r.ErrorCode, r.Error)
		}
		s.configs[topic] = map[string]string{"retention.ms": "7200000", "max.message.bytes": "2000000"}
	}
	if s.c.can(opAlterLegacy) {
		// Legacy AlterConfigs replaces the whole override set.
		s.c.Must(t, addr, Op{Op: opAlterLegacy, Topic: topic, Configs: map[string]string{"retention.ms": "10800000"}})
		checkConfigs(t, "after legacy alter", s.describe(t, topic), map[string]string{"retention.ms": "10800000"})
		if c := adminConfigs(t, s.b, topic)["max.message.bytes"]; c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			t.Errorf("legacy AlterConfigs kept override max.message.bytes=%s; Kafka resets overrides not in the request", c.MaybeValue())
		}
		r := s.c.Do(t, addr, Op{Op: opAlterLegacy, Topic: topic, Configs: map[string]string{"retention.ms": "abc"}})
		if r.ErrorCode != codeInvalidConfig {
			t.Errorf("legacy alter retention.ms=abc: code %d (%s), want 40", r.ErrorCode, r.Error)
		}
		checkConfigs(t, "after rejected alter", s.describe(t, topic), map[string]string{"retention.ms": "10800000"})
		s.configs[topic] = map[string]string{"retention.ms": "10800000"}
	}
}

func (s *suite) deleteRecords(t *testing.T) {
	s.need(t, opDeleteRecords)
	topic := "data-none"
	want, ok := s.expected[topic]
	if !ok {
		t.Skip("produce scenario did not run")
	}
	r := s.c.Must(t, s.b.Addr(), Op{Op: opDeleteRecords, Topic: topic, Offset: 2})
	if r.Offset != 2 {
		t.Errorf("low watermark after delete records = %d, want 2", r.Offset)
	}
	want = want[2:]
	s.expected[topic] = want
	got := s.fetch(t, topic, 0, -2, len(want))
	checkRecords(t, "fetch from beginning after delete records", got, want, s.c.can(opTimestamps))
}

func (s *suite) compactRejectsUnkeyed(t *testing.T) {
	topic := "compact-topic"
	s.createTopic(t, topic, 1, map[string]string{"cleanup.policy": "compact"})
	s.produce(t, Op{Topic: topic, Records: []Rec{{Key: strp("k"), Value: strp("v")}}})
	r := s.c.Do(t, s.b.Addr(), Op{Op: opProduce, Topic: topic, Records: []Rec{{Value: strp("no key")}}})
	if r.ErrorCode != codeInvalidRecord {
		t.Errorf("unkeyed record to compacted topic: code %d (%s), want INVALID_RECORD (87)", r.ErrorCode, r.Error)
	}
	s.produce(t, Op{Topic: topic, Records: []Rec{{Key: strp("k"), Value: nil}}})
	got := s.fetch(t, topic, 0, -2, 2)
	checkRecords(t, "compacted topic", got, []Rec{{Key: strp("k"), Value: strp("v"), Offset: 0}, {Key: strp("k"), Offset: 1}}, false)
}

func (s *suite) maxMessageBytes(t *testing.T) {
	topic := "small-topic"
	s.createTopic(t, topic, 1, map[string]string{"max.message.bytes": "10000"})
	big := Rec{Key: strp("big"), Value: strp(strings.Repeat("x", 20000))}
	r := s.c.Do(t, s.b.Addr(), Op{Op: opProduce, Topic: topic, Records: []Rec{big}})
	if r.ErrorCode != codeTooLarge {
		t.Errorf("20000-byte record to max.message.bytes=10000 topic: code %d (%s), want MESSAGE_TOO_LARGE (10)", r.ErrorCode, r.Error)
	}
	ok := Rec{Key: strp("ok"), Value: strp(strings.Repeat("y", 5000))}
	s.produce(t, Op{Topic: topic, Records: []Rec{ok}})
	got := s.fetch(t, topic, 0, -2, 1)
	checkRecords(t, "small topic", got, []Rec{ok}, false)
}

func (s *suite) logAppendTime(t *testing.T) {
	s.need(t, opLogAppendTime)
	topic := "append-time-topic"
	s.createTopic(t, topic, 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	before := time.Now().UnixMilli()
	rec := Rec{Key: strp("k"), Value: strp("v")}
	if s.c.can(opTimestamps) {
		rec.Timestamp = before - 3600*1000 // the broker must overwrite it
	}
	s.produce(t, Op{Topic: topic, Records: []Rec{rec}})
	after := time.Now().UnixMilli()
	got := s.fetch(t, topic, 0, -2, 1)
	if len(got) != 1 {
		t.Fatalf("got %d records, want 1", len(got))
	}
	if ts := got[0].Timestamp; ts < before-1 || ts > after+1 {
		t.Errorf("LogAppendTime topic: record timestamp %d, want the broker's append time in [%d, %d]", ts, before, after)
	}
}

func (s *suite) topicCompressionType(t *testing.T) {
	topic := "gzip-topic"
	s.createTopic(t, topic, 1, map[string]string{"compression.type": "gzip"})
	want := sampleRecords(time.Now().Add(-time.Minute).UnixMilli(), 20)
	want = s.adapt(want)
	in := append([]Rec(nil), want...)
	if !s.c.can(opTimestamps) {
		for i := range in {
			in[i].Timestamp = 0
		}
	}
	s.produce(t, Op{Topic: topic, Records: in, Compression: "none"})
	got := s.fetch(t, topic, 0, -2, len(want))
	checkRecords(t, "compression.type=gzip topic", got, want, s.c.can(opTimestamps))
	recs := kgoFetch(t, s.b, topic, 0, kgo.NewOffset().AtStart(), len(want))
	for _, r := range recs {
		if r.Attrs.CompressionType() != 1 {
			t.Errorf("compression.type=gzip topic serves offset %d with compression type %d, want 1 (gzip)", r.Offset, r.Attrs.CompressionType())
			break
		}
	}
}

func (s *suite) idempotent(t *testing.T) {
	s.need(t, opIdempotent)
	topic := "idem-topic"
	s.createTopic(t, topic, 1, nil)
	var want []Rec
	for round := 0; round < 2; round++ {
		var in []Rec
		for i := 0; i < 50; i++ {
			n := round*50 + i
			r := Rec{Key: strp(fmt.Sprintf("id-%d", n%7)), Value: strp(fmt.Sprintf("idem %d", n)), Offset: int64(n)}
			in = append(in, r)
			want = append(want, r)
		}
		offs := s.produce(t, Op{Topic: topic, Records: in, Idempotent: true, Compression: "none"})
		for i, o := range offs {
			if o >= 0 && o != int64(round*50+i) {
				t.Errorf("idempotent produce: record %d acknowledged at offset %d", round*50+i, o)
				break
			}
		}
	}
	got := s.fetch(t, topic, 0, -2, len(want))
	checkRecords(t, "idempotent read back", got, want, false)
	for i := range want {
		if i < len(got) {
			want[i].Timestamp = got[i].Timestamp
		}
	}
	s.expected[topic] = want
}

func (s *suite) restartReadBack(t *testing.T) {
	if len(s.expected) == 0 {
		t.Skip("nothing produced")
	}
	s.b.Restart()
	for topic, want := range s.expected {
		from := int64(-2)
		got := s.fetch(t, topic, 0, from, len(want))
		checkRecords(t, "after restart "+topic, got, want, true)
	}
	for topic, cfg := range s.configs {
		checkConfigs(t, "after restart "+topic, s.describe(t, topic), cfg)
	}
	if _, ok := s.configs["cfg-topic"]; ok {
		waitTopic(t, s.b, "cfg-topic", 3)
	}
}

func (s *suite) deleteTopic(t *testing.T) {
	s.need(t, opDeleteTopic)
	topic := "doomed-topic"
	s.createTopic(t, topic, 2, nil)
	s.produce(t, Op{Topic: topic, Records: []Rec{{Key: strp("a"), Value: strp("b")}}})
	s.c.Must(t, s.b.Addr(), Op{Op: opDeleteTopic, Topic: topic})
	waitFor(t, "deleted topic gone", 20*time.Second, func() error {
		if topicExists(t, s.b, topic) {
			return fmt.Errorf("%s still listed", topic)
		}
		return nil
	})
	if s.c.can(opList) {
		for _, name := range s.c.Must(t, s.b.Addr(), Op{Op: opList}).Topics {
			if name == topic {
				t.Errorf("%s lists deleted topic %s", s.c.Name, topic)
			}
		}
	}
	if s.c.can(opDescribe) {
		r := s.c.Do(t, s.b.Addr(), Op{Op: opDescribe, Topic: topic})
		if r.ErrorCode != codeUnknownTopic {
			t.Errorf("describe deleted topic: code %d (%s), want UNKNOWN_TOPIC_OR_PARTITION (3)", r.ErrorCode, r.Error)
		}
	}
	// The name can be reused: the new topic starts empty at offset 0.
	s.createTopic(t, topic, 1, nil)
	fresh := Rec{Key: strp("again"), Value: strp("new topic")}
	s.produce(t, Op{Topic: topic, Records: []Rec{fresh}})
	got := s.fetch(t, topic, 0, -2, 1)
	checkRecords(t, "recreated topic", got, []Rec{fresh}, false)
}

func TestSarama(t *testing.T) { t.Parallel(); runSuite(t, saramaClient()) }
