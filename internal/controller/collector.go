package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/strata-io/strata/internal/meta"
)

// Collector exports Kafka's controller metrics under the names Kafka's
// JMX exporter rules give them (kafka.controller:type=KafkaController,
// name=ActiveControllerCount -> kafka_controller_kafkacontroller_activecontrollercount),
// so dashboards built for Kafka work unchanged.
type Collector struct {
	cache  *meta.Cache
	active func() bool
	descs  [4]*prometheus.Desc
}

// NewCollector reads the cache at each scrape; active reports whether this
// node is the active controller.
func NewCollector(cache *meta.Cache, active func() bool) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("kafka_controller_kafkacontroller_"+name, help, nil, nil)
	}
	return &Collector{cache: cache, active: active, descs: [4]*prometheus.Desc{
		d("activecontrollercount", "1 on the active controller, 0 elsewhere (Kafka's ActiveControllerCount)."),
		d("offlinepartitionscount", "Partitions without a live leader (Kafka's OfflinePartitionsCount)."),
		d("globalpartitioncount", "Partitions in the cluster (Kafka's GlobalPartitionCount)."),
		d("globaltopiccount", "Topics in the cluster (Kafka's GlobalTopicCount)."),
	}}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	v := c.cache.View()
	active := 0.0
	if c.active() {
		active = 1
	}
	ch <- prometheus.MustNewConstMetric(c.descs[0], prometheus.GaugeValue, active)
	ch <- prometheus.MustNewConstMetric(c.descs[1], prometheus.GaugeValue, float64(v.OfflinePartitions()))
	ch <- prometheus.MustNewConstMetric(c.descs[2], prometheus.GaugeValue, float64(v.PartitionCount()))
	ch <- prometheus.MustNewConstMetric(c.descs[3], prometheus.GaugeValue, float64(len(v.Topics)))
}
