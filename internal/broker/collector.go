package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports per-partition size and offsets, and per-topic size.
type collector struct {
	b *Broker
	// internalPartitions exports the per-partition series of internal
	// topics too (strata.metrics.internal.partitions).
	internalPartitions               bool
	size, start, end, hw, recoveryPt *prometheus.Desc
	topicSize                        *prometheus.Desc
}

// NewCollector returns a Prometheus collector of per-partition gauges
// (size on disk, log start offset, log end offset, high watermark,
// recovery point) and of each topic's size. The internal topics'
// partitions (100 with Kafka's defaults) are left out of the per-partition
// series unless internalPartitions is set; their size is in the per-topic
// series either way.
func NewCollector(b *Broker, internalPartitions bool) prometheus.Collector {
	labels := []string{"topic", "partition"}
	return &collector{
		b:                  b,
		internalPartitions: internalPartitions,
		size:               prometheus.NewDesc("strata_partition_size_bytes", "Bytes of all segment files of the partition.", labels, nil),
		start:              prometheus.NewDesc("strata_partition_log_start_offset", "First readable offset of the partition.", labels, nil),
		end:                prometheus.NewDesc("strata_partition_log_end_offset", "Next offset to be assigned in the partition.", labels, nil),
		hw:                 prometheus.NewDesc("strata_partition_high_watermark", "End of the readable (durable) prefix of the partition.", labels, nil),
		recoveryPt:         prometheus.NewDesc("strata_partition_recovery_point", "Offset below which the partition is known fsynced.", labels, nil),
		topicSize:          prometheus.NewDesc("strata_topic_size_bytes", "Bytes of all segment files of the topic's partitions.", []string{"topic"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.start
	ch <- c.end
	ch <- c.hw
	ch <- c.recoveryPt
	ch <- c.topicSize
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
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
