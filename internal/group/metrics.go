package group

import "github.com/prometheus/client_golang/prometheus"

// metrics exports group counts by state, members and offset commits.
type metrics struct {
	c       *Coordinator
	groups  *prometheus.Desc
	members *prometheus.Desc
	lag     *prometheus.Desc
	commits prometheus.Counter
	// rebalances counts classic generations completed with members and
	// KIP-848 group epoch bumps.
	rebalances prometheus.Counter
}

func newMetrics(c *Coordinator) *metrics {
	return &metrics{
		c:       c,
		groups:  prometheus.NewDesc("strata_group_groups", "Consumer groups by state.", []string{"state"}, nil),
		members: prometheus.NewDesc("strata_group_members", "Members of all consumer groups.", nil, nil),
		// As Burrow and kminion report it (kminion's
		// kminion_kafka_consumer_group_topic_lag): records between each
		// committed offset and its partition's high watermark, summed per
		// group and topic.
		lag: prometheus.NewDesc("strata_consumer_group_lag",
			"Records between a group's committed offsets and the high watermarks of their partitions, summed over the topic's partitions the group committed.",
			[]string{"group", "topic"}, nil),
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_group_offset_commits_total",
			Help: "Partition offsets committed (stored in __consumer_offsets).",
		}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_group_rebalances_total",
			Help: "Completed rebalances: classic generations with members and KIP-848 group epoch bumps.",
		}),
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.groups
	ch <- m.members
	if m.c.cfg.HighWatermark != nil {
		ch <- m.lag
	}
	m.commits.Describe(ch)
	m.rebalances.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	counts := make([]int, len(stateNames))
	members := 0
	hw := m.c.cfg.HighWatermark
	for _, g := range m.c.snapshot() {
		g.mu.Lock()
		counts[g.state]++
		members += len(g.members)
		var lags map[string]int64
		if hw != nil && g.state != stateDead {
			lags = map[string]int64{}
			for k, off := range g.offsets {
				if end, ok := hw(k.topic, k.partition); ok {
					lags[k.topic] += max(end-off.offset, 0)
				}
			}
		}
		id := g.id
		g.mu.Unlock()
		for topic, lag := range lags {
			ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, float64(lag), id, topic)
		}
	}
	for s, n := range counts {
		if state(s) == stateDead {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.groups, prometheus.GaugeValue, float64(n), state(s).String())
	}
	ch <- prometheus.MustNewConstMetric(m.members, prometheus.GaugeValue, float64(members))
	m.commits.Collect(ch)
	m.rebalances.Collect(ch)
}
