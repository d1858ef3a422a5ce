package server_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/servertest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func sp(s string) *string { return &s }

// consumeAll reads n records of topic from the given offsets.
func consumeAll(t *testing.T, tb *servertest.Broker, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	ctx := ctxT(t)
	if len(opts) == 0 {
		opts = []kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	}
	cl := tb.Client(opts...)
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("poll %s: %v (have %d of %d)", topic, err, len(out), n)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func TestCreateTopicsConfigsAndRejections(t *testing.T) {
	tb := startBroker(t, "", nil)
	adm := tb.Admin()
	ctx := ctxT(t)

	resp, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{
		"cleanup.policy": sp("compact,delete"), "retention.ms": sp("3600000"), "segment.bytes": sp("1048576"),
	}, "good")
	if err != nil || resp.Err != nil {
		t.Fatalf("create good: %v %v", err, resp.Err)
	}
	for _, policy := range []string{"delete", "compact", "delete,compact"} {
		name := "policy-" + fmt.Sprint(len(policy))
		if r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": sp(policy)}, name); err != nil || r.Err != nil {
			t.Fatalf("cleanup.policy=%s: %v %v", policy, err, r.Err)
		}
	}

	bad := []struct {
		name    string
		configs map[string]*string
		rf      int16
		want    error
	}{
		{"bad-unknown", map[string]*string{"no.such.config": sp("1")}, 1, kerr.InvalidConfig},
		{"bad-range", map[string]*string{"segment.bytes": sp("1")}, 1, kerr.InvalidConfig},
		{"bad-policy", map[string]*string{"cleanup.policy": sp("compact,bogus")}, 1, kerr.InvalidConfig},
		{"bad-type", map[string]*string{"retention.ms": sp("soon")}, 1, kerr.InvalidConfig},
		{"bad-null", map[string]*string{"retention.ms": nil}, 1, kerr.InvalidConfig},
		{"bad-lag", map[string]*string{"min.compaction.lag.ms": sp("10"), "max.compaction.lag.ms": sp("5")}, 1, kerr.InvalidConfig},
		{"bad-unhonoured", map[string]*string{"remote.storage.enable": sp("true")}, 1, kerr.InvalidConfig},
		{"bad-rf", nil, 3, kerr.InvalidReplicationFactor},
		{"good", nil, 1, kerr.TopicAlreadyExists},
		{"bad/name", nil, 1, kerr.InvalidTopicException},
	}
	for _, c := range bad {
		r, err := adm.CreateTopic(ctx, 1, c.rf, c.configs, c.name)
		if err != nil && r.Err == nil {
			r.Err = err
		}
		if !errors.Is(r.Err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, r.Err, c.want)
		}
		if c.want == kerr.InvalidConfig && (r.ErrMessage == "") {
			t.Errorf("%s: no error message", c.name)
		}
	}
	// No partial topic was created.
	td, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range bad {
		if c.name != "good" && td.Has(c.name) {
			t.Errorf("rejected topic %s exists", c.name)
		}
	}
	if len(td["good"].Partitions) != 3 {
		t.Errorf("good has %d partitions", len(td["good"].Partitions))
	}
	// validate_only creates nothing.
	vr, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "validated")
	if err != nil || vr.Error() != nil {
		t.Fatalf("validate only: %v %v", err, vr.Error())
	}
	td, _ = adm.ListTopics(ctx)
	if td.Has("validated") {
		t.Error("validate_only created the topic")
	}
	// Create partitions.
	cp, err := adm.CreatePartitions(ctx, 2, "good")
	if err != nil || cp.Error() != nil {
		t.Fatalf("create partitions: %v %v", err, cp.Error())
	}
	td, _ = adm.ListTopics(ctx, "good")
	if n := len(td["good"].Partitions); n != 5 {
		t.Errorf("after CreatePartitions: %d partitions", n)
	}
}

func TestProduceConsumeKindsOffsetsTimestamps(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, nil, "kinds"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("kinds"), kgo.RequiredAcks(kgo.AllISRAcks()), fetchMax(12))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	recs := []*kgo.Record{
		{Key: []byte("k1"), Value: []byte("keyed"), Timestamp: base},
		{Value: []byte("unkeyed"), Timestamp: base.Add(time.Minute)},
		{Key: []byte("k2"), Value: nil, Timestamp: base.Add(2 * time.Minute)},
		{Key: []byte{}, Value: []byte{}, Timestamp: base.Add(3 * time.Minute), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}},
	}
	for _, r := range recs {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	got := consumeAll(t, tb, "kinds", 4)
	for i, r := range got {
		w := recs[i]
		if r.Offset != int64(i) || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) ||
			(r.Key == nil) != (w.Key == nil) || (r.Value == nil) != (w.Value == nil) || !r.Timestamp.Equal(w.Timestamp) {
			t.Errorf("record %d: got off=%d key=%q(nil=%v) val=%q(nil=%v) ts=%v", i, r.Offset, r.Key, r.Key == nil, r.Value, r.Value == nil, r.Timestamp)
		}
	}
	if len(got[3].Headers) != 1 || got[3].Headers[0].Key != "h" {
		t.Errorf("headers: %+v", got[3].Headers)
	}
	// From an offset.
	fromOff := consumeAll(t, tb, "kinds", 2, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kinds": {0: kgo.NewOffset().At(2)}}))
	if fromOff[0].Offset != 2 {
		t.Errorf("from offset 2: first %d", fromOff[0].Offset)
	}
	// From a timestamp.
	fromTs := consumeAll(t, tb, "kinds", 2, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"kinds": {0: kgo.NewOffset().AfterMilli(base.Add(90 * time.Second).UnixMilli())}}))
	if fromTs[0].Offset != 2 {
		t.Errorf("from timestamp: first %d", fromTs[0].Offset)
	}
	// ListOffsets: earliest, latest, max timestamp, by time.
	adm := tb.Admin()
	if lo, err := adm.ListStartOffsets(ctx, "kinds"); err != nil || lo["kinds"][0].Offset != 0 {
		t.Errorf("start offsets %v %v", lo, err)
	}
	if lo, err := adm.ListEndOffsets(ctx, "kinds"); err != nil || lo["kinds"][0].Offset != 4 {
		t.Errorf("end offsets %v %v", lo, err)
	}
	if lo, err := adm.ListMaxTimestampOffsets(ctx, "kinds"); err != nil || lo["kinds"][0].Offset != 3 || lo["kinds"][0].Timestamp != base.Add(3*time.Minute).UnixMilli() {
		t.Errorf("max timestamp offsets %+v %v", lo["kinds"][0], err)
	}
	if lo, err := adm.ListOffsetsAfterMilli(ctx, base.Add(30*time.Second).UnixMilli(), "kinds"); err != nil || lo["kinds"][0].Offset != 1 {
		t.Errorf("offset after milli %+v %v", lo["kinds"][0], err)
	}
	// Fetch beyond the end: OFFSET_OUT_OF_RANGE.
	req := kmsg.NewPtrFetchRequest()
	req.Version = 11
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "kinds"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset = 100
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	fr, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := fr.Topics[0].Partitions[0].ErrorCode; c != kerr.OffsetOutOfRange.Code {
		t.Errorf("fetch at 100: error %d", c)
	}
}

func TestCompactedTopicRejectsNullKeys(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := tb.Admin().CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": sp("compact")}, "cmp"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("cmp"), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0))
	err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("no key")}).FirstErr()
	if !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("null key on compacted topic: %v, want INVALID_RECORD", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// DeleteRecords on compact-only topic: POLICY_VIOLATION.
	dr, err := tb.Admin().DeleteRecords(ctx, kadm.Offsets{"cmp": {0: {Topic: "cmp", Partition: 0, At: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := dr["cmp"][0].Err; !errors.Is(e, kerr.PolicyViolation) {
		t.Errorf("delete records on compacted topic: %v", e)
	}
}

func TestAlterDescribeConfigs(t *testing.T) {
	tb := startBroker(t, "", map[string]string{"log.retention.hours": "48"})
	ctx := ctxT(t)
	adm := tb.Admin()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.bytes": sp("1000000")}, "cfg"); err != nil {
		t.Fatal(err)
	}
	desc := func() map[string]*kadm.Config {
		t.Helper()
		rc, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil {
			t.Fatal(err)
		}
		r, err := rc.On("cfg", nil)
		if err != nil || r.Err != nil {
			t.Fatal(err, r.Err)
		}
		m := map[string]*kadm.Config{}
		for i := range r.Configs {
			m[r.Configs[i].Key] = &r.Configs[i]
		}
		return m
	}
	m := desc()
	if len(m) < 20 {
		t.Errorf("only %d configs described", len(m))
	}
	if c := m["retention.bytes"]; c.MaybeValue() != "1000000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Errorf("retention.bytes: %+v", c)
	}
	if c := m["retention.ms"]; c.MaybeValue() != "172800000" || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("retention.ms from log.retention.hours=48: %+v", c)
	}
	if c := m["segment.bytes"]; c.MaybeValue() != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("segment.bytes: %+v", c)
	}
	// Incremental: SET, APPEND, DELETE.
	_, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: sp("600000")},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: sp("compact")},
		{Op: kadm.DeleteConfig, Name: "retention.bytes"},
	}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	m = desc()
	if m["segment.ms"].MaybeValue() != "600000" || m["cleanup.policy"].MaybeValue() != "delete,compact" || m["retention.bytes"].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("after incremental alter: segment.ms=%s cleanup.policy=%s retention.bytes source=%v",
			m["segment.ms"].MaybeValue(), m["cleanup.policy"].MaybeValue(), m["retention.bytes"].Source)
	}
	if p, _ := tb.Server().Broker().Partition("cfg", 0); !p.Log.Config().Compact || p.Log.Config().SegmentMs != 10*time.Minute {
		t.Errorf("storage config not updated: %+v", p.Log.Config())
	}
	// SUBTRACT.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: sp("delete")}}, "cfg"); err != nil {
		t.Fatal(err)
	}
	if v := desc()["cleanup.policy"].MaybeValue(); v != "compact" {
		t.Errorf("after subtract: %s", v)
	}
	// Bad value: INVALID_CONFIG, nothing changes.
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: sp("1")}, {Op: kadm.SetConfig, Name: "retention.ms", Value: sp("-5")}}, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Errorf("bad incremental alter: %v", ar[0].Err)
	}
	if desc()["segment.ms"].MaybeValue() != "600000" {
		t.Error("failed alter changed segment.ms")
	}
	// Legacy AlterConfigs: whole state; unnamed configs revert.
	lr, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: sp("2000")}}, "cfg")
	if err != nil || lr[0].Err != nil {
		t.Fatal(err, lr[0].Err)
	}
	m = desc()
	if m["max.message.bytes"].MaybeValue() != "2000" || m["segment.ms"].Source == kmsg.ConfigSourceDynamicTopicConfig || m["cleanup.policy"].MaybeValue() != "delete" {
		t.Errorf("after legacy alter: max.message.bytes=%s segment.ms source=%v cleanup.policy=%s",
			m["max.message.bytes"].MaybeValue(), m["segment.ms"].Source, m["cleanup.policy"].MaybeValue())
	}
	// The new max.message.bytes is honoured.
	cl := tb.Client(kgo.DefaultProduceTopic("cfg"), kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	big := make([]byte, 5000)
	rand.Read(big)
	err = cl.ProduceSync(ctx, &kgo.Record{Value: big}).FirstErr()
	if !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("5000-byte record with max.message.bytes=2000: %v", err)
	}
	// Synonyms on request.
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType = kmsg.ConfigResourceTypeTopic
	rr.ResourceName = "cfg"
	rr.ConfigNames = []string{"retention.ms"}
	req.Resources = append(req.Resources, rr)
	dr, err := req.RequestWith(ctx, tb.Client())
	if err != nil {
		t.Fatal(err)
	}
	syn := dr.Resources[0].Configs[0].ConfigSynonyms
	if len(syn) < 2 || syn[0].Name != "log.retention.hours" || *syn[0].Value != "48" {
		t.Errorf("synonyms of retention.ms: %+v", syn)
	}
}

func TestDeleteRecordsDeleteTopicRestart(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	adm := tb.Admin()
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": sp("86400000")}, "keep"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client()
	for i := 0; i < 20; i++ {
		for _, topic := range []string{"keep", "gone"} {
			r := &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d", topic, i))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{"keep": {0: {Topic: "keep", Partition: 0, At: 3}}})
	if err != nil || dr["keep"][0].Err != nil || dr["keep"][0].LowWatermark != 3 {
		t.Fatalf("delete records: %v %+v", err, dr["keep"][0])
	}
	if _, err := adm.DeleteTopics(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	td, _ := adm.ListTopics(ctx)
	if td.Has("gone") {
		t.Fatal("gone still listed")
	}
	before := td["keep"].ID

	tb.Restart()
	adm = tb.Admin()
	td, err = adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if td.Has("gone") || !td.Has("keep") || td["keep"].ID != before || len(td["keep"].Partitions) != 2 {
		t.Fatalf("after restart: %+v", td)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "keep")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range rc[0].Configs {
		if c.Key == "retention.ms" && c.Value != nil && *c.Value == "86400000" && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			found = true
		}
	}
	if !found {
		t.Error("retention.ms override lost over restart")
	}
	so, _ := adm.ListStartOffsets(ctx, "keep")
	if o := so["keep"][0].Offset; o != 3 {
		t.Errorf("log start offset after restart: %d", o)
	}
	got := consumeAll(t, tb, "keep", 17)
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
	}
	if len(seen) != 17 {
		t.Errorf("read back %d distinct records", len(seen))
	}
	// A fresh topic with the deleted name starts empty.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "gone"); err != nil {
		t.Fatal(err)
	}
	if eo, _ := adm.ListEndOffsets(ctx, "gone"); eo["gone"][0].Offset != 0 {
		t.Errorf("recreated topic has end offset %d", eo["gone"][0].Offset)
	}
}

func TestCompressionCodecsAndIdempotence(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	codecs := map[string]kgo.CompressionCodec{"gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for name, codec := range codecs {
		topic := "codec-" + name
		if _, err := tb.Admin().CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		cl := tb.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec))
		var rs []*kgo.Record
		for i := 0; i < 50; i++ {
			rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte(name), 100)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := consumeAll(t, tb, topic, 50)
		if len(got) != 50 || string(got[49].Key) != "49" {
			t.Errorf("%s: read %d", name, len(got))
		}
	}
	// kgo is idempotent by default: InitProducerId + sequence numbers.
	p, _ := tb.Server().Broker().Partition("codec-gzip", 0)
	if p.Log.LogEndOffset() != 50 {
		t.Errorf("end offset %d", p.Log.LogEndOffset())
	}
}
