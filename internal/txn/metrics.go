package txn

import "github.com/prometheus/client_golang/prometheus"

// metrics exports transactional ids by state and counts of completions,
// timeouts, expirations and marker failures.
type metrics struct {
	c              *Coordinator
	txns           *prometheus.Desc
	commits        prometheus.Counter
	aborts         prometheus.Counter
	timedOut       prometheus.Counter
	expired        prometheus.Counter
	markerFailures prometheus.Counter
}

func newMetrics(c *Coordinator) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &metrics{
		c:              c,
		txns:           prometheus.NewDesc("strata_txn_transactional_ids", "Transactional ids by transaction state.", []string{"state"}, nil),
		commits:        counter("strata_txn_commits_total", "Transactions committed (markers written, CompleteCommit stored)."),
		aborts:         counter("strata_txn_aborts_total", "Transactions aborted (markers written, CompleteAbort stored)."),
		timedOut:       counter("strata_txn_timed_out_total", "Ongoing transactions aborted by the coordinator after their timeout."),
		expired:        counter("strata_txn_expired_ids_total", "Idle transactional ids expired (tombstoned)."),
		markerFailures: counter("strata_txn_marker_failures_total", "Failed attempts to write transaction markers (retried)."),
	}
}

func (m *metrics) counters() []prometheus.Counter {
	return []prometheus.Counter{m.commits, m.aborts, m.timedOut, m.expired, m.markerFailures}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.txns
	for _, c := range m.counters() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	var counts [numStates]int
	m.c.mu.Lock()
	for _, t := range m.c.txns {
		counts[t.state]++
	}
	m.c.mu.Unlock()
	for s, n := range counts {
		if state(s) == stateDead || state(s) == statePrepareEpochFence {
			continue
		}
		ch <- prometheus.MustNewConstMetric(m.txns, prometheus.GaugeValue, float64(n), state(s).String())
	}
	for _, c := range m.counters() {
		c.Collect(ch)
	}
}
