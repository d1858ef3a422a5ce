package broker

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// constCollector is Collector's Collect as it was, with
// prometheus.MustNewConstMetric per series: the reference
// TestCollectorSeries compares with and BenchmarkPartitionFigures measures
// against.
type constCollector struct{ *Collector }

func (c constCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.b.Topics() {
		var total int64
		for _, p := range t.Partitions {
			if p.Log == nil {
				continue
			}
			size := p.Log.Size()
			total += size
			if t.Internal && !c.internalPartitions {
				continue
			}
			lv := []string{t.Name, strconv.Itoa(int(p.Index))}
			ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(size), lv...)
			ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(p.Log.LogStartOffset()), lv...)
			ch <- prometheus.MustNewConstMetric(c.end, prometheus.GaugeValue, float64(p.Log.LogEndOffset()), lv...)
			ch <- prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(p.Log.HighWatermark()), lv...)
			ch <- prometheus.MustNewConstMetric(c.recoveryPt, prometheus.GaugeValue, float64(p.Log.RecoveryPoint()), lv...)
		}
		ch <- prometheus.MustNewConstMetric(c.topicSize, prometheus.GaugeValue, float64(total), t.Name)
	}
}

// scrape is a pedantic registry's text exposition of c.
func scrape(t testing.TB, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// TestCollectorSeries: the collector's series (shared label pairs) are
// those of const metrics, byte for byte, with and without the internal
// topics' partitions; EachPartition visits the partitions exported.
func TestCollectorSeries(t *testing.T) {
	br := openTest(t, t.TempDir())
	defer br.Close()
	for _, req := range []CreateTopicRequest{
		{Name: "a", NumPartitions: 12, ReplicationFactor: 1},
		{Name: "b", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "__consumer_offsets", NumPartitions: 3, ReplicationFactor: 1, Internal: true},
	} {
		if _, err := br.CreateTopic(req); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := br.Partition("a", 11)
	if _, err := p.Append(context.Background(), testBatch(t, 3), -1); err != nil {
		t.Fatal(err)
	}
	for _, internal := range []bool{false, true} {
		c := NewCollector(br, internal)
		got, want := scrape(t, c), scrape(t, constCollector{c})
		if got != want {
			t.Fatalf("internal=%v: series differ from const metrics:\n%s\nwant:\n%s", internal, got, want)
		}
		n := 0
		c.EachPartition(func(topic string, p int32, size, end int64) {
			n++
			if topic == "a" && p == 11 && (end != 3 || size == 0) {
				t.Errorf("a/11: size %d, end %d", size, end)
			}
		})
		if want := map[bool]int{false: 13, true: 16}[internal]; n != want {
			t.Errorf("internal=%v: EachPartition visited %d partitions, want %d", internal, n, want)
		}
	}
}

// BenchmarkPartitionFigures is the cost of one reading of the partitions'
// figures at 10,000 partitions (10 topics of 1,000): "gather" is a registry
// Gather of the collector's series (a /metrics scrape, and what the
// console's history sampler did every 10 s until it read EachPartition;
// "gather-const" with const metrics, as Collect was), "each" is the sampler's reading now (log end offsets summed by topic).
func BenchmarkPartitionFigures(b *testing.B) {
	br := openTestB(b, b.TempDir())
	defer br.Close()
	var reqs []CreateTopicRequest
	for t := range 10 {
		reqs = append(reqs, CreateTopicRequest{Name: fmt.Sprintf("t%d", t), NumPartitions: 1000, ReplicationFactor: 1})
	}
	if _, errs := br.CreateTopics(reqs); len(errs) > 0 {
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	c := NewCollector(br, false)
	for _, col := range []struct {
		name string
		c    prometheus.Collector
	}{{"gather-const", constCollector{c}}, {"gather", c}, {"gather-const", constCollector{c}}, {"gather", c}} {
		reg := prometheus.NewRegistry()
		reg.MustRegister(col.c)
		b.Run(col.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				mfs, err := reg.Gather()
				if err != nil || len(mfs) != 6 {
					b.Fatal(len(mfs), err)
				}
			}
		})
	}
	b.Run("each", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ends, parts := map[string]float64{}, map[string]int{}
			c.EachPartition(func(topic string, _ int32, _, logEnd int64) {
				ends[topic] += float64(logEnd)
				parts[topic]++
			})
			if parts["t0"] != 1000 {
				b.Fatal(parts)
			}
		}
	})
}
