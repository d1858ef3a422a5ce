package protocol

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metrics are the protocol layer's Prometheus metrics.
type metrics struct {
	reg           prometheus.Registerer
	collectors    []prometheus.Collector
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	connections   prometheus.Gauge
	bytesReceived prometheus.Counter
	bytesSent     prometheus.Counter
	topicBytesIn  *prometheus.CounterVec
	topicBytesOut *prometheus.CounterVec
	// throttled and throttleSeconds count responses throttled by a client
	// quota and the throttle time they carried, by the quota that decided
	// it (Kafka's per-quota-type throttle-time metrics).
	throttled       *prometheus.CounterVec
	throttleSeconds *prometheus.CounterVec
	// followerReads counts consumer fetch partitions served by this
	// broker as a follower (KIP-392).
	followerReads prometheus.Counter
}

// sendfileStats counts the zero-copy fetch path's system calls.
type sendfileStats struct {
	calls atomic.Int64
	bytes atomic.Int64
}

func newMetrics(reg prometheus.Registerer, s *Server) (*metrics, error) {
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_requests_total", Help: "Kafka requests handled, by API.",
		}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "strata_request_duration_seconds", Help: "Time from a request's dispatch to its response being written, by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"api"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "strata_open_connections", Help: "Open Kafka client connections.",
		}),
		bytesReceived: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_network_received_bytes_total", Help: "Request bytes read from clients.",
		}),
		bytesSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_network_sent_bytes_total", Help: "Response bytes written to clients (fetch record bytes included).",
		}),
		topicBytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_topic_bytes_in_total", Help: "Record bytes appended by produce requests, by topic.",
		}, []string{"topic"}),
		topicBytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_topic_bytes_out_total", Help: "Record bytes returned by fetch requests, by topic.",
		}, []string{"topic"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_quota_throttled_responses_total", Help: "Responses that carried a throttle time because a client quota was exceeded, by quota (produce, fetch, request, controller_mutation).",
		}, []string{"quota"}),
		throttleSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_quota_throttle_seconds_total", Help: "Throttle time given to clients over their quotas (throttle_time_ms, the connection muted meanwhile), by quota.",
		}, []string{"quota"}),
		followerReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "strata_fetch_follower_reads_total", Help: "Partitions of consumer fetches served by this broker as a follower replica (KIP-392 follower fetching).",
		}),
	}
	sendfileCalls := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "strata_fetch_sendfile_calls_total", Help: "sendfile(2) calls made by the zero-copy fetch path.",
	}, func() float64 { return float64(s.sendfile.calls.Load()) })
	sendfileBytes := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "strata_fetch_sendfile_bytes_total", Help: "Record bytes sent with sendfile(2).",
	}, func() float64 { return float64(s.sendfile.bytes.Load()) })
	m.collectors = []prometheus.Collector{m.requests, m.latency, m.connections, m.bytesReceived, m.bytesSent,
		m.topicBytesIn, m.topicBytesOut, m.throttled, m.throttleSeconds, m.followerReads, sendfileCalls, sendfileBytes}
	if reg != nil {
		for _, c := range m.collectors {
			if err := reg.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if errors.As(err, &are) {
					continue
				}
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) unregister() {
	if m.reg == nil {
		return
	}
	for _, c := range m.collectors {
		m.reg.Unregister(c)
	}
}

// observe records one handled request.
func (m *metrics) observe(key int16, d time.Duration) {
	name := apiName(key)
	m.requests.WithLabelValues(name).Inc()
	m.latency.WithLabelValues(name).Observe(d.Seconds())
}

// apiName is Kafka's name for an API key ("Produce", "Fetch", ...).
func apiName(key int16) string {
	if r := kmsg.RequestForKey(key); r != nil {
		return kmsg.NameForKey(key)
	}
	return strconv.Itoa(int(key))
}
