package replica

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/quota"
)

// counters are the Manager's event counts.
type counters struct {
	shrinks, expands, failedUpdates atomic.Int64
	// uncleanLeaderships: this broker became leader by an unclean
	// election; lostOffsets: offsets this replica truncated below its
	// high watermark (committed records an unclean election lost).
	uncleanLeaderships, lostOffsets atomic.Int64
}

// Collector exports the replica manager's state under the names Kafka's
// JMX exporter rules give Kafka's (kafka.server:type=ReplicaManager,
// name=UnderReplicatedPartitions -> kafka_server_replicamanager_underreplicatedpartitions;
// meters such as IsrShrinksPerSec -> kafka_server_replicamanager_isrshrinks_total;
// kafka.server:type=FetcherLagMetrics,name=ConsumerLag ->
// kafka_server_fetcherlagmetrics_consumerlag), so Kafka dashboards work.
type Collector struct {
	m     *Manager
	descs struct {
		underReplicated, underMinISR, atMinISR, leaders, partitions, shrinks, expands, failed, lag *prometheus.Desc
		unclean, lost                                                                              *prometheus.Desc
		throttledBytes, throttleSkips                                                              *prometheus.Desc
	}
}

// NewCollector returns the manager's collector; register it once.
func NewCollector(m *Manager) *Collector {
	c := &Collector{m: m}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	c.descs.underReplicated = d("kafka_server_replicamanager_underreplicatedpartitions", "Partitions led here whose ISR is smaller than the replica set (Kafka's UnderReplicatedPartitions).")
	c.descs.underMinISR = d("kafka_server_replicamanager_underminisrpartitioncount", "Partitions led here whose ISR is below min.insync.replicas: acks=all is refused and the high watermark does not advance (Kafka's UnderMinIsrPartitionCount).")
	c.descs.atMinISR = d("kafka_server_replicamanager_atminisrpartitioncount", "Partitions led here whose ISR is exactly min.insync.replicas (Kafka's AtMinIsrPartitionCount).")
	c.descs.leaders = d("kafka_server_replicamanager_leadercount", "Replicated partitions led by this broker (Kafka's LeaderCount).")
	c.descs.partitions = d("kafka_server_replicamanager_partitioncount", "Replicated partitions hosted by this broker (Kafka's PartitionCount).")
	c.descs.shrinks = d("kafka_server_replicamanager_isrshrinks_total", "ISR shrinks committed by this broker as leader (Kafka's IsrShrinksPerSec).")
	c.descs.expands = d("kafka_server_replicamanager_isrexpands_total", "ISR expansions committed by this broker as leader (Kafka's IsrExpandsPerSec).")
	c.descs.failed = d("kafka_server_replicamanager_failedisrupdates_total", "ISR changes whose compare-and-set was refused (Kafka's FailedIsrUpdatesPerSec).")
	c.descs.unclean = d("strata_replica_unclean_leaderships_total", "Leaderships this broker took by an unclean election (unclean.leader.election.enable or ElectLeaders UNCLEAN): it was not in the ISR, so records committed by the previous leaders past its log end are lost.")
	c.descs.lost = d("strata_replica_unclean_lost_offsets_total", "Offsets this replica truncated below its high watermark to follow a leader elected uncleanly: committed records lost (each replica counts its own).")
	c.descs.throttledBytes = d("strata_replication_throttled_bytes_total", "Bytes of throttled partitions (leader/follower.replication.throttled.replicas naming this broker) counted against the replication quota: side=leader sent to followers (leader.replication.throttled.rate), side=follower fetched (follower.replication.throttled.rate); Kafka's LeaderReplication/FollowerReplication byte-rate.", "side")
	c.descs.throttleSkips = d("strata_replication_throttle_skips_total", "Times a throttled partition of an out-of-sync replica was left out of a fetch (side=follower) or answered without records (side=leader) because the replication quota was exceeded.", "side")
	c.descs.lag = d("kafka_server_fetcherlagmetrics_consumerlag", "Offsets a follower replica is behind its leader's high watermark (Kafka's FetcherLagMetrics ConsumerLag).", "topic", "partition")
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.descs.underReplicated, c.descs.underMinISR, c.descs.atMinISR, c.descs.leaders,
		c.descs.partitions, c.descs.shrinks, c.descs.expands, c.descs.failed, c.descs.lag, c.descs.unclean, c.descs.lost,
		c.descs.throttledBytes, c.descs.throttleSkips} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	rs := make([]*Replica, 0, len(c.m.replicas))
	for _, r := range c.m.replicas {
		rs = append(rs, r)
	}
	c.m.mu.Unlock()
	var under, underMin, atMin, leaders float64
	for _, r := range rs {
		r.mu.Lock()
		if l := r.leader; l != nil {
			leaders++
			if l.UnderReplicated() {
				under++
			}
			if l.UnderMinISR() {
				underMin++
			} else if len(l.st.ISR) == l.effectiveMinISR() {
				atMin++
			}
		} else if r.fetcher != nil {
			lag := max(r.leaderHW-r.log.LogEndOffset(), 0)
			ch <- prometheus.MustNewConstMetric(c.descs.lag, prometheus.GaugeValue, float64(lag), r.tp.Topic, strconv.Itoa(int(r.tp.Partition)))
		}
		r.mu.Unlock()
	}
	g := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	g(c.descs.underReplicated, under)
	g(c.descs.underMinISR, underMin)
	g(c.descs.atMinISR, atMin)
	g(c.descs.leaders, leaders)
	g(c.descs.partitions, float64(len(rs)))
	ct := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	ct(c.descs.shrinks, c.m.counts.shrinks.Load())
	ct(c.descs.expands, c.m.counts.expands.Load())
	ct(c.descs.failed, c.m.counts.failedUpdates.Load())
	ct(c.descs.unclean, c.m.counts.uncleanLeaderships.Load())
	ct(c.descs.lost, c.m.counts.lostOffsets.Load())
	for side, q := range map[string]*quota.Replication{"leader": c.m.cfg.LeaderQuota, "follower": c.m.cfg.FollowerQuota} {
		var bytes, skips int64
		if q != nil {
			bytes, skips = q.Recorded(), q.SkippedCount()
		}
		ch <- prometheus.MustNewConstMetric(c.descs.throttledBytes, prometheus.CounterValue, float64(bytes), side)
		ch <- prometheus.MustNewConstMetric(c.descs.throttleSkips, prometheus.CounterValue, float64(skips), side)
	}
}
