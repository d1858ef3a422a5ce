// Package metrics holds Strata's Prometheus registry helpers and the HTTP
// server for /metrics, /healthz, /readyz and extra admin endpoints. Other
// packages register their own collectors on the *prometheus.Registry they
// are given; nothing here is global.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every Strata metric name (strata_...).
const Namespace = "strata"

// NewRegistry returns a registry with the Go runtime and process
// collectors registered.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Counter creates and registers a counter named strata_<subsystem>_<name>.
func Counter(reg prometheus.Registerer, subsystem, name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help})
	reg.MustRegister(c)
	return c
}

// CounterVec creates and registers a labelled counter.
func CounterVec(reg prometheus.Registerer, subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	reg.MustRegister(c)
	return c
}

// Gauge creates and registers a gauge.
func Gauge(reg prometheus.Registerer, subsystem, name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help})
	reg.MustRegister(g)
	return g
}

// GaugeVec creates and registers a labelled gauge.
func GaugeVec(reg prometheus.Registerer, subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
	reg.MustRegister(g)
	return g
}

// LatencyBuckets returns histogram buckets in seconds from 50µs to ~26s.
func LatencyBuckets() []float64 { return prometheus.ExponentialBuckets(0.00005, 2, 20) }

// HistogramVec creates and registers a labelled histogram (seconds).
func HistogramVec(reg prometheus.Registerer, subsystem, name, help string, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: LatencyBuckets()}, labels)
	reg.MustRegister(h)
	return h
}
