package etcdnode

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the member's health (Status) as strata_metadata_store_*
// gauges.
type Collector struct {
	n     *Node
	descs []*prometheus.Desc
}

// NewCollector returns a collector reading n at each scrape.
func NewCollector(n *Node) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("strata_metadata_store_"+name, help, nil, nil)
	}
	return &Collector{n: n, descs: []*prometheus.Desc{
		d("db_size_bytes", "Size of the metadata store's backend file."),
		d("db_size_in_use_bytes", "Bytes of the backend holding live data (the rest is reclaimed by defragmentation)."),
		d("has_leader", "1 when the metadata store has a leader (a quorum of controllers is up)."),
		d("is_leader", "1 when this member is the metadata store's leader."),
		d("is_learner", "1 while this member is a non-voting learner."),
		d("members", "Members of the metadata store (voters and learners)."),
		d("raft_term", "The metadata store's Raft term."),
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
	s := c.n.Status()
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	vals := []float64{float64(s.DBSize), float64(s.DBSizeInUse), b(s.LeaderID != 0), b(s.IsLeader), b(s.IsLearner), float64(s.Members), float64(s.Term)}
	for i, d := range c.descs {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, vals[i])
	}
}
