package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/twmb/franz-go/pkg/kerr"
)

func testConfig(t *testing.T, dir string, kv ...string) *config.Broker {
	t.Helper()
	ov := map[string]string{"log.dirs": dir}
	for i := 0; i+1 < len(kv); i += 2 {
		ov[kv[i]] = kv[i+1]
	}
	cfg, err := config.LoadBroker("", nil, ov)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func openTest(t *testing.T, dir string, kv ...string) *Broker {
	t.Helper()
	b, err := Open(testConfig(t, dir, kv...), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sp(s string) *string { return &s }

func TestResolveConfigDefaultsAndOverrides(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), "log.retention.hours", "1", "log.segment.bytes", "2000000")
	sc, ts, err := resolveConfig(cfg, map[string]string{
		"cleanup.policy": "compact,delete", "segment.ms": "60000", "message.timestamp.type": "LogAppendTime",
		"compression.type": "zstd", "min.insync.replicas": "2", "max.message.bytes": "5000",
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	if sc.RetentionMs != 3600000 || sc.SegmentBytes != 2000000 || sc.SegmentMs != time.Minute ||
		!sc.Compact || !sc.Delete || !sc.LogAppendTime || sc.MaxMessageBytes != 5000 || !sc.Durable {
		t.Errorf("storage config: %+v", sc)
	}
	if !ts.requireKeys || ts.compression != record.Zstd || ts.minISR != 2 {
		t.Errorf("broker settings: %+v", ts)
	}
	sc, ts, _ = resolveConfig(cfg, nil, false)
	if sc.Compact || !sc.Delete || ts.compression != -1 || sc.Durable || sc.MaxMessageBytes != 1048588 {
		t.Errorf("defaults: %+v %+v", sc, ts)
	}
}

func TestMetadataPersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	t1, err := b.CreateTopic(CreateTopicRequest{Name: "a", NumPartitions: 3, ReplicationFactor: 1,
		Configs: map[string]*string{"retention.ms": sp("1000")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "b", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.CreatePartitions("b", 2, false); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTopicConfigs("b", map[string]string{"segment.ms": "100000"}, false); err != nil {
		t.Fatal(err)
	}
	p, _ := b.Partition("a", 1)
	if _, err := p.Append(context.Background(), testBatch(t, 5), -1); err != nil {
		t.Fatal(err)
	}
	pid, _, err := b.InitProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{metaPropertiesName, cleanShutdownName, metadataFileName, recoveryCheckpointName, startCheckpointName} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s missing after clean close: %v", f, err)
		}
	}
	mp, _ := os.ReadFile(filepath.Join(dir, metaPropertiesName))
	if !strings.Contains(string(mp), "node.id=1") || !strings.Contains(string(mp), "cluster.id=") {
		t.Errorf("meta.properties: %s", mp)
	}
	clusterID := b.ClusterID()

	b = openTest(t, dir)
	defer b.Close()
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownName)); !os.IsNotExist(err) {
		t.Error("clean shutdown marker not removed at startup")
	}
	if b.ClusterID() != clusterID {
		t.Errorf("cluster id changed: %s -> %s", clusterID, b.ClusterID())
	}
	ta := b.Topic("a")
	if ta == nil || ta.ID != t1.ID || len(ta.Partitions) != 3 || ta.Configs["retention.ms"] != "1000" {
		t.Fatalf("topic a after reopen: %+v", ta)
	}
	if tb := b.Topic("b"); tb == nil || len(tb.Partitions) != 2 || tb.Configs["segment.ms"] != "100000" {
		t.Fatalf("topic b after reopen: %+v", tb)
	}
	if p, _ := b.Partition("b", 0); p.Log.Config().SegmentMs != 100*time.Second {
		t.Errorf("b config not applied on reopen: %v", p.Log.Config().SegmentMs)
	}
	if p, _ := b.Partition("a", 1); p.Log.LogEndOffset() != 5 {
		t.Errorf("a-1 end offset %d", p.Log.LogEndOffset())
	}
	if pid2, _, _ := b.InitProducerID(); pid2 <= pid {
		t.Errorf("producer id reused: %d then %d", pid, pid2)
	}
}

func TestLockAndNodeID(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	if _, err := Open(testConfig(t, dir), slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Error("second broker opened a locked log dir")
	}
	b.Close()
	if _, err := Open(testConfig(t, dir, "node.id", "7"), slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
		t.Error("log dir of node 1 opened as node 7")
	}
}

func TestCreateTopicErrors(t *testing.T) {
	b := openTest(t, t.TempDir())
	defer b.Close()
	cases := []struct {
		req  CreateTopicRequest
		want error
	}{
		{CreateTopicRequest{Name: "x", NumPartitions: 0, ReplicationFactor: 1}, kerr.InvalidPartitions},
		{CreateTopicRequest{Name: "x", NumPartitions: 1, ReplicationFactor: 2}, kerr.InvalidReplicationFactor},
		{CreateTopicRequest{Name: "x", NumPartitions: 1, ReplicationFactor: 1, Configs: map[string]*string{"cleanup.policy": sp("bogus")}}, kerr.InvalidConfig},
		{CreateTopicRequest{Name: "x*", NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
		{CreateTopicRequest{Name: strings.Repeat("a", 250), NumPartitions: 1, ReplicationFactor: 1}, kerr.InvalidTopicException},
	}
	for _, c := range cases {
		if _, err := b.CreateTopic(c.req); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.req.Name, err, c.want)
		}
	}
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "a.b", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "a_b", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, kerr.InvalidTopicException) {
		t.Errorf("colliding name: %v", err)
	}
	if err := b.CreatePartitions("a.b", 1, false); !errors.Is(err, kerr.InvalidPartitions) {
		t.Errorf("non-increase: %v", err)
	}
	if len(b.Topics()) != 1 {
		t.Errorf("%d topics", len(b.Topics()))
	}
}

func TestDescribeConfigSources(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir, "log.retention.hours", "2")
	defer b.Close()
	entries := describeTopicConfig(b.Config(), map[string]string{"segment.bytes": "1048576"})
	got := map[string]ConfigEntry{}
	for _, e := range entries {
		got[e.Name] = e
	}
	if e := got["segment.bytes"]; e.Value != "1048576" || e.Source != SourceTopic || len(e.Synonyms) < 2 {
		t.Errorf("segment.bytes: %+v", e)
	}
	if e := got["retention.ms"]; e.Value != "7200000" || e.Source != SourceStaticBroker || e.Synonyms[0].Name != "log.retention.hours" {
		t.Errorf("retention.ms: %+v", e)
	}
	if e := got["flush.ms"]; e.Source != SourceDefault {
		t.Errorf("flush.ms: %+v", e)
	}
	if len(entries) != len(config.TopicSettings()) {
		t.Errorf("%d entries for %d settings", len(entries), len(config.TopicSettings()))
	}
}

func TestCompressionTypeRecompresses(t *testing.T) {
	b := openTest(t, t.TempDir())
	defer b.Close()
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "z", NumPartitions: 1, ReplicationFactor: 1,
		Configs: map[string]*string{"compression.type": sp("gzip")}}); err != nil {
		t.Fatal(err)
	}
	p, _ := b.Partition("z", 0)
	if _, err := p.Append(context.Background(), testBatch(t, 3), 1); err != nil {
		t.Fatal(err)
	}
	f, _, err := p.Log.OpenSegment(0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	hdr := make([]byte, record.HeaderSize)
	if _, err := f.File().ReadAt(hdr, 0); err != nil {
		t.Fatal(err)
	}
	if c := record.Batch(hdr).Compression(); c != record.Gzip {
		t.Errorf("stored codec %d, want gzip", c)
	}
}

func testBatch(t *testing.T, n int) []byte {
	t.Helper()
	var recs []record.Record
	for i := 0; i < n; i++ {
		recs = append(recs, record.Record{Key: []byte{byte(i)}, Value: []byte("v")})
	}
	h := recordtest.NoProducer
	h.PartitionLeaderEpoch, h.BaseTimestamp = 0, time.Now().UnixMilli()
	return recordtest.Batch(h, recs...)
}

func openTestB(b *testing.B, dir string) *Broker {
	b.Helper()
	cfg, err := config.LoadBroker("", nil, map[string]string{"log.dirs": dir})
	if err != nil {
		b.Fatal(err)
	}
	br, err := Open(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	return br
}
