package config

import (
	"net"
	"strconv"
	"strings"
)

// brokerTable lists every broker setting Strata accepts. Kafka names and
// defaults, except: node.id defaults to 1 (a single node starts with zero
// config), listeners to PLAINTEXT://127.0.0.1:9092, log.dirs to
// ./strata-data; settings prefixed "strata." are Strata's own.
var brokerTable = sortTable(readOnly(append([]Setting{
	// Identity and network.
	def("node.id", TypeInt, "1", atLeast(0),
		"Id of this node; kept in meta.properties and in partition leadership. broker.id is an alias."),
	def("broker.id", TypeInt, "1", atLeast(0),
		"Alias of node.id (setting either sets both)."),
	def("listeners", TypeString, "PLAINTEXT://127.0.0.1:9092", custom("NAME://host:port,... (port 0 = random); NAME a security protocol or a name in listener.security.protocol.map", func(v string) string { return listenersSyntax(v, true, false) }),
		"Listeners the node binds: any number of client listeners, each PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL through listener.security.protocol.map (listener.name.<name>.<setting> sets one listener's settings); controllers add their controller listener. An empty host binds every interface."),
	def("advertised.listeners", TypeString, "", custom("empty, or NAME://host:port,... naming listeners", func(v string) string { return listenersSyntax(v, false, true) }),
		"Addresses given to clients in metadata responses, per listener name: a client is given every broker's address on the listener it connected to. A listener not named here is advertised at its bound address (127.0.0.1 for 0.0.0.0, with a warning)."),
	def("socket.request.max.bytes", TypeInt, "104857600", atLeast(1),
		"Largest request the broker reads; larger requests close the connection."),
	def("socket.send.buffer.bytes", TypeInt, "102400", socketBuffer,
		"SO_SNDBUF of the Kafka listener's connections, in bytes (Linux doubles it for bookkeeping); -1 keeps the operating system's default and its automatic tuning."),
	def("socket.receive.buffer.bytes", TypeInt, "102400", socketBuffer,
		"SO_RCVBUF of the Kafka listener's connections, in bytes (Linux doubles it for bookkeeping); -1 keeps the operating system's default and its automatic tuning."),
	// Connection limits (Kafka's SocketServer and ConnectionQuotas).
	def("max.connections", TypeInt, "2147483647", atLeast(0),
		"The maximum number of connections the broker holds at any time, in addition to the per-IP limits. When it is reached the listeners stop accepting: new connections wait in the listen backlog until a connection closes. listener.name.<listener>.max.connections bounds one listener (default: this value). With several listeners the inter-broker listener is protected, as in Kafka: it still accepts at the limit, and the other listeners then close their least recently active connections. Dynamic (cluster default or per broker), as are the per-listener and per-IP limits; open connections stay."),
	def("max.connections.per.ip", TypeInt, "2147483647", atLeast(0),
		"The maximum number of connections from one IP address; a new connection beyond it is closed at once (logged as rejected). 0 is allowed only with max.connections.per.ip.overrides."),
	def("max.connections.per.ip.overrides", TypeString, "", custom("empty, or a comma-separated list of host:count (an IP address or a host name resolved at startup or when changed dynamically)", connectionOverridesReason),
		"Per-IP or per-host-name overrides of max.connections.per.ip, for example \"hostName:100,127.0.0.1:200\"."),
	def("connections.max.idle.ms", TypeLong, "600000", anyValue,
		"A connection with no request in progress that has neither sent a request nor received an answer for this long is closed. Negative disables it."),
	def("queued.max.request.bytes", TypeLong, "-1", anyValue,
		"The number of bytes of requests read and not yet answered, across all connections, above which no more requests are read until answers go out (one request may always be read while any room is left). -1 (or 0) means no limit; otherwise it must be at least socket.request.max.bytes."),
	// Storage.
	def("log.dirs", TypeString, "./strata-data", custom("non-empty comma-separated list of directories", nonEmptyList),
		"Directories holding partition logs (comma-separated). log.dir is an alias."),
	def("log.dir", TypeString, "./strata-data", custom("non-empty comma-separated list of directories", nonEmptyList),
		"Alias of log.dirs (setting either sets both)."),
	def("num.recovery.threads.per.data.dir", TypeInt, "2", atLeast(1),
		"Threads per log directory that recover and load logs at startup and flush them at shutdown."),
	def("log.flush.offset.checkpoint.interval.ms", TypeInt, "60000", atLeast(0),
		"How often the recovery-point checkpoint is written."),
	def("log.retention.check.interval.ms", TypeLong, "300000", atLeast(1),
		"How often non-compacted logs are checked for segments to delete by retention."),
	def("strata.idle.roll.check.interval.ms", TypeLong, "10000", atLeast(1),
		"How often idle partitions are checked against segment.ms, so a segment that gets no more appends still rolls (Kafka rolls only on append)."),
	def("strata.durable.acks", TypeBoolean, "true", anyValue,
		"When true, acks=all produce requests are answered only after their data is fsynced (group commit), and the high watermark covers only fsynced data. When false, acks=all is answered once the data is written (not fsynced) and consumers may read it at once, so a power loss (not a process crash) can lose acknowledged records; the group and transaction coordinators' own records (committed offsets, group metadata, transaction state and markers) are fsynced before they are answered either way."),
	def("strata.log.max.open.files", TypeInt, "10000", atLeast(1),
		"Most segment .log files the broker keeps open at once, over all partitions and log dirs (Kafka keeps every segment's file open for the segment's life). Files open on first use and the least recently used close past the limit, active segments included: an idle partition's file closes after its bytes are fsynced and reopens at its next append or fetch. Index files hold no descriptor (read into memory). Set it above the number of partitions written at once: past that, closing a written partition's file costs an fsync. Must stay well below the process's open-file limit (ulimit -n), which connections share."),
	def("strata.log.journal.bytes", TypeLong, "67108864", zeroOrAtLeast(1<<20),
		"Largest size of each of the two write-ahead journal files of a log dir (0 turns the journal off). A group-commit round over many partitions writes their new bytes to the journal and fsyncs it once instead of fsyncing every segment file; recovery replays it into the segments (see docs/storage.md). The files are created only when such a round first happens, each sized to at most this and 1/16 of the disk's free space then (none when that is under 1 MiB: rounds then fsync the segments directly, and creation is tried again a minute later), and removed again after two minutes without such a round, at a clean shutdown and at the next start. Only used with strata.durable.acks=true."),
	def("strata.log.min.free.bytes", TypeLong, "1073741824", atLeast(0),
		"Free space kept on each log dir's file system (0: none). Below it the broker refuses appends (produce, replication, transaction markers and coordinator records), cleaner output and new segment preallocation with KAFKA_STORAGE_ERROR, keeps serving reads, and writes again once space is freed. The reserve is what the metadata store (embedded etcd, which shares the first log dir unless metadata.log.dir is set) writes into: its footprint is bounded well below the 1 GiB default (docs/cluster.md \"Disk use of the metadata store\"), and etcd stops the process when one of its writes meets a full disk. Free space is measured with statfs every second, when a write is refused and after a write fails for lack of space, not at every append."),
	// Topic defaults.
	def("auto.create.topics.enable", TypeBoolean, "true", anyValue,
		"Create a topic when a client asks for metadata of, or produces to, a topic that does not exist."),
	def("num.partitions", TypeInt, "1", atLeast(1),
		"Partition count of auto-created topics and of CreateTopics requests that leave it to the broker (-1)."),
	def("default.replication.factor", TypeInt, "1", atLeast(1),
		"Replication factor of auto-created topics and of CreateTopics requests that leave it to the broker (-1)."),
	def("offsets.topic.replication.factor", TypeShort, "3", atLeast(1),
		"Replication factor of __consumer_offsets (Kafka's default 3). In a cluster it is capped, with a log line, by the brokers registered when the topic is created at the first FindCoordinator and by the largest replication factor the cluster accepts; a single node keeps one replica."),
	def("transaction.state.log.replication.factor", TypeShort, "3", atLeast(1),
		"Replication factor of __transaction_state (Kafka's default 3), capped as offsets.topic.replication.factor."),
	def("transaction.state.log.min.isr", TypeInt, "2", atLeast(1),
		"min.insync.replicas of __transaction_state (Kafka's default 2), capped by the topic's replication factor."),
	def("delete.topic.enable", TypeBoolean, "true", anyValue,
		"Whether DeleteTopics is allowed."),
	def("compression.type", TypeString, "producer", oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
		"Default for the topic setting compression.type."),
	def("message.max.bytes", TypeInt, "1048588", atLeast(0),
		"Default for the topic setting max.message.bytes: largest record batch accepted."),
	def("min.insync.replicas", TypeInt, "1", atLeast(1),
		"Default for the topic setting min.insync.replicas."),
	def("unclean.leader.election.enable", TypeBoolean, "false", anyValue,
		"Default for the topic setting unclean.leader.election.enable."),
	// Replication (docs/replication.md): Kafka's follower fetcher settings
	// (ReplicationConfigs), with Kafka's names and defaults.
	def("num.replica.fetchers", TypeInt, "1", atLeast(1),
		"Fetcher connections (and goroutines) per source broker that replicate its partitions to this broker; partitions are spread over them."),
	def("replica.lag.time.max.ms", TypeLong, "30000", atLeast(1),
		"A follower that has not caught up with the leader's log end within this time is removed from the ISR."),
	def("replica.fetch.max.bytes", TypeInt, "1048576", atLeast(0),
		"Bytes of record batches a follower asks for per partition in each fetch (a larger first batch is still returned)."),
	def("replica.fetch.response.max.bytes", TypeInt, "10485760", atLeast(0),
		"Bytes of record batches a follower asks for in a whole fetch response."),
	def("replica.fetch.min.bytes", TypeInt, "1", atLeast(1),
		"Bytes a follower's fetch waits for before the leader answers (up to replica.fetch.wait.max.ms)."),
	def("replica.fetch.wait.max.ms", TypeInt, "500", atLeast(0),
		"Longest time the leader holds a follower's fetch waiting for replica.fetch.min.bytes; at most replica.lag.time.max.ms."),
	def("replica.high.watermark.checkpoint.interval.ms", TypeLong, "5000", atLeast(1),
		"How often each log dir's replication-offset-checkpoint (the high watermark of every replicated partition) is written; also at shutdown. A replica restarted after a crash exposes nothing past the high watermark found there until its leader tells it more is committed."),
	def("replica.fetch.backoff.ms", TypeInt, "1000", atLeast(0),
		"Pause before a follower fetches a partition again after a fetch error. A refusal because the leader has not applied the leader epoch sent yet (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH: right after an election) is retried after 1/32 of it, doubling up to it."),
	// Replication throttles (KIP-73; Kafka's QuotaConfig.brokerQuotaConfigs
	// and ReplicationQuotaManager): dynamic broker configs (cluster default
	// or per broker; Kafka reads them only dynamically, Strata also from the
	// static configuration) bounding the bytes of the partitions the topic
	// settings leader/follower.replication.throttled.replicas name.
	def("leader.replication.throttled.rate", TypeLong, maxLong, atLeast(0),
		"Bytes per second this broker sends, as leader, to out-of-sync followers of the partitions leader.replication.throttled.replicas throttles on it (every such partition's bytes count; in-sync followers are never held back). Set it dynamically during a reassignment (kafka-reassign-partitions --throttle, strata cluster decommission --throttle) and remove it after."),
	def("follower.replication.throttled.rate", TypeLong, maxLong, atLeast(0),
		"Bytes per second this broker fetches, as follower, for the partitions follower.replication.throttled.replicas throttles on it; a caught-up replica is never held back. Set it dynamically during a reassignment and remove it after."),
	def("replication.quota.window.num", TypeInt, "11", atLeast(1),
		"Number of samples kept for the replication throttles."),
	def("replication.quota.window.size.seconds", TypeInt, "1", atLeast(1),
		"Length of each sample of the replication throttles, in seconds."),
	// KIP-392: Kafka's ReplicaSelector plugin; Strata has the one Kafka
	// ships (the default null: consumers read from the leader only).
	def("replica.selector.class", TypeString, "", custom("empty (leader only) or "+RackAwareReplicaSelector, replicaSelectorReason),
		"Follower fetching (KIP-392): "+RackAwareReplicaSelector+" sends a consumer that names its rack (client.rack) to an in-sync replica in that rack (broker.rack); empty: consumers read from the leader. Followers serve consumers up to their high watermark either way (Fetch v11+)."),
	// Preferred leaders (Kafka's ReplicationConfigs): the active
	// controller's periodic preferred-leader election.
	def("auto.leader.rebalance.enable", TypeBoolean, "true", anyValue,
		"The active controller checks leader balance every leader.imbalance.check.interval.seconds and gives partitions back to their preferred replica (the first of the replica list) once it is in the ISR, for every broker whose share of preferred partitions led elsewhere exceeds leader.imbalance.per.broker.percentage."),
	def("leader.imbalance.check.interval.seconds", TypeLong, "300", atLeast(1),
		"How often the active controller checks leader balance (auto.leader.rebalance.enable)."),
	def("leader.imbalance.per.broker.percentage", TypeInt, "10", atLeast(0),
		"The share (percent) of a broker's preferred partitions that may be led by other brokers before the controller moves them back."),
	def("log.segment.bytes", TypeInt, "1073741824", atLeast(14),
		"Default for segment.bytes: size at which a segment is rolled."),
	def("log.roll.ms", TypeLong, "", atLeast(1),
		"Default for segment.ms in milliseconds; when unset log.roll.hours is used."),
	def("log.roll.hours", TypeInt, "168", atLeast(1),
		"Default for segment.ms in hours (used when log.roll.ms is unset)."),
	def("log.roll.jitter.ms", TypeLong, "", atLeast(0),
		"Default for segment.jitter.ms; when unset log.roll.jitter.hours is used."),
	def("log.roll.jitter.hours", TypeInt, "0", atLeast(0),
		"Default for segment.jitter.ms in hours (used when log.roll.jitter.ms is unset)."),
	def("log.retention.ms", TypeLong, "", atLeast(-1),
		"Default for retention.ms; -1 means no time limit. When unset, log.retention.minutes then log.retention.hours are used."),
	def("log.retention.minutes", TypeInt, "", anyValue,
		"Default for retention.ms in minutes (used when log.retention.ms is unset; negative = no limit)."),
	def("log.retention.hours", TypeInt, "168", anyValue,
		"Default for retention.ms in hours (used when log.retention.ms and log.retention.minutes are unset; negative = no limit)."),
	def("log.retention.bytes", TypeLong, "-1", anyValue,
		"Default for retention.bytes; -1 means no size limit."),
	def("log.segment.delete.delay.ms", TypeLong, "60000", atLeast(0),
		"Default for file.delete.delay.ms."),
	def("log.index.interval.bytes", TypeInt, "4096", atLeast(0),
		"Default for index.interval.bytes."),
	def("log.index.size.max.bytes", TypeInt, "10485760", atLeast(4),
		"Default for segment.index.bytes."),
	def("log.flush.interval.messages", TypeLong, maxLong, atLeast(1),
		"Default for flush.messages."),
	def("log.flush.interval.ms", TypeLong, "", atLeast(0),
		"Default for flush.ms; unset means never flush by time (beyond strata.durable.acks)."),
	def("log.message.timestamp.type", TypeString, "CreateTime", oneOf("CreateTime", "LogAppendTime"),
		"Default for message.timestamp.type."),
	def("log.message.timestamp.before.max.ms", TypeLong, maxLong, atLeast(0),
		"Default for message.timestamp.before.max.ms."),
	def("log.message.timestamp.after.max.ms", TypeLong, maxLong, atLeast(0),
		"Default for message.timestamp.after.max.ms."),
	def("log.preallocate", TypeBoolean, "false", anyValue,
		"Default for preallocate."),
	def("log.cleanup.policy", TypeList, "delete", subsetOf("compact", "delete"),
		"Default for cleanup.policy."),
	// Cleaner.
	def("log.cleaner.enable", TypeBoolean, "true", anyValue,
		"Run the log cleaner. When false, compacted topics are neither compacted nor subject to retention."),
	def("log.cleaner.threads", TypeInt, "1", atLeast(0),
		"Number of cleaner threads."),
	def("log.cleaner.dedupe.buffer.size", TypeLong, "134217728", atLeast(0),
		"Memory for the key-to-offset maps of all cleaner threads together."),
	def("log.cleaner.io.max.bytes.per.second", TypeDouble, "1.7976931348623157E308", floatAtLeast(0),
		"Cap on the cleaner's combined read and write rate."),
	def("log.cleaner.backoff.ms", TypeLong, "15000", atLeast(0),
		"Pause of a cleaner thread when no log needs cleaning."),
	def("log.cleaner.min.cleanable.ratio", TypeDouble, "0.5", floatBetween(0, 1),
		"Default for min.cleanable.dirty.ratio."),
	def("log.cleaner.delete.retention.ms", TypeLong, "86400000", atLeast(0),
		"Default for delete.retention.ms."),
	def("log.cleaner.min.compaction.lag.ms", TypeLong, "0", atLeast(0),
		"Default for min.compaction.lag.ms."),
	def("log.cleaner.max.compaction.lag.ms", TypeLong, maxLong, atLeast(1),
		"Default for max.compaction.lag.ms."),
	// Groups and producers.
	def("offsets.topic.num.partitions", TypeInt, "50", atLeast(1),
		"Partitions of __consumer_offsets (fixed once the topic exists)."),
	def("offsets.commit.timeout.ms", TypeInt, "5000", atLeast(1),
		"How long a write of the group coordinator (an offset commit, a group's assignment, a transactional offset commit, a KIP-848 group record) may wait to be replicated to the __consumer_offsets partition's in-sync replicas and fsynced; past it the request is answered COORDINATOR_NOT_AVAILABLE and the client retries."),
	def("offsets.retention.minutes", TypeInt, "10080", atLeast(1),
		"Committed offsets of a group with no members are dropped after this long."),
	def("offsets.retention.check.interval.ms", TypeLong, "600000", atLeast(1),
		"How often expired committed offsets are looked for."),
	def("group.initial.rebalance.delay.ms", TypeInt, "3000", atLeast(0),
		"How long the first rebalance of a new group waits for more members to join."),
	def("group.min.session.timeout.ms", TypeInt, "6000", atLeast(0),
		"Smallest session timeout a consumer may ask for."),
	def("group.max.session.timeout.ms", TypeInt, "1800000", atLeast(0),
		"Largest session timeout a consumer may ask for."),
	def("group.max.size", TypeInt, "2147483647", atLeast(1),
		"Most members a classic consumer group takes; JoinGroup of a member over it is answered GROUP_MAX_SIZE_REACHED."),
	def("group.consumer.max.size", TypeInt, "2147483647", atLeast(1),
		"Most members a KIP-848 consumer group takes; ConsumerGroupHeartbeat of a new member over it is answered GROUP_MAX_SIZE_REACHED."),
	def("group.consumer.session.timeout.ms", TypeInt, "45000", atLeast(1),
		"Session timeout of KIP-848 consumer group members (ConsumerGroupHeartbeat)."),
	def("group.consumer.heartbeat.interval.ms", TypeInt, "5000", atLeast(1),
		"Heartbeat interval given to KIP-848 consumer group members; must be below group.consumer.session.timeout.ms."),
	def("producer.id.expiration.ms", TypeInt, "86400000", atLeast(1),
		"How long the state of an idle producer id is kept for idempotence."),
	// Transactions.
	def("transaction.state.log.num.partitions", TypeInt, "50", atLeast(1),
		"Partitions of __transaction_state (fixed once the topic exists)."),
	def("transaction.state.log.segment.bytes", TypeInt, "104857600", atLeast(1024),
		"segment.bytes of __transaction_state when it is created."),
	def("transaction.max.timeout.ms", TypeInt, "900000", atLeast(1),
		"Largest transaction timeout a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it)."),
	def("transactional.id.expiration.ms", TypeInt, "604800000", atLeast(1),
		"A transactional id with no transaction for this long is forgotten."),
	def("transaction.abort.timed.out.transaction.cleanup.interval.ms", TypeInt, "10000", atLeast(1),
		"How often transactions past their timeout are looked for and aborted."),
	def("transaction.remove.expired.transaction.cleanup.interval.ms", TypeInt, "3600000", atLeast(1),
		"How often expired transactional ids are looked for."),
	// Operations.
	def("strata.metrics.listener", TypeString, "127.0.0.1:9644", custom("empty, or host:port", hostPortReason),
		"Address of the HTTP listener for the web console (/), /metrics, /healthz, /readyz and the /v1 admin API. Empty disables it. On a non-loopback address the console requires a SCRAM user's login."),
	def("strata.metrics.internal.partitions", TypeBoolean, "false", anyValue,
		"Export the per-partition series (size, offsets, cleaner dirtiness) of the internal topics __consumer_offsets and __transaction_state: 8 series for each of their partitions (100 by default). When false their size is in strata_topic_size_bytes only."),
	def("strata.log.level", TypeString, "info", oneOf("debug", "info", "warn", "error"),
		"Level of the broker's own log."),
	def("strata.log.format", TypeString, "text", oneOf("text", "json"),
		"Format of the broker's own log on stderr."),
}, append(append(append(sslTable, saslTable...), kraftTable...), securityTable...)...)))

var brokerIndex = indexTable(brokerTable)

// aliases maps a broker setting to the one it mirrors; setting either sets
// both.
var aliases = map[string]string{
	"broker.id": "node.id", "node.id": "broker.id",
	"log.dir": "log.dirs", "log.dirs": "log.dir",
}

// RackAwareReplicaSelector is the value of replica.selector.class that
// turns follower fetching on (Kafka's class name).
const RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

func replicaSelectorReason(v string) string {
	if v == "" || v == RackAwareReplicaSelector {
		return ""
	}
	return "Strata has no replica selector " + v + "; the only one is " + RackAwareReplicaSelector + " (Kafka's rack-aware selector), or empty for leader-only reads"
}

func readOnly(t []Setting) []Setting {
	for i := range t {
		t[i].ReadOnly = true
	}
	return t
}

func nonEmptyList(v string) string {
	if len(splitList(v)) == 0 {
		return "must not be empty"
	}
	return ""
}

// socketBuffer accepts Kafka's socket buffer sizes: -1 for the OS default
// (Selectable.USE_DEFAULT_BUFFER_SIZE) or a positive byte count.
var socketBuffer = custom("-1 (the OS default) or [1,...]", func(v string) string {
	if n, _ := strconv.ParseInt(v, 10, 64); n == 0 || n < -1 {
		return "must be -1 (the operating system's default) or a positive number of bytes"
	}
	return ""
})

// hostPortReason validates "host:port" ("" allowed).
func hostPortReason(v string) string {
	if v == "" {
		return ""
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return "must look like host:port"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "port must be a number from 0 to 65535"
	}
	return ""
}

// ConnectionOverrides parses max.connections.per.ip.overrides
// ("host:count,...", Kafka's getMap) into host -> count.
func ConnectionOverrides(v string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range splitList(v) {
		i := strings.LastIndexByte(item, ':')
		if i <= 0 {
			return nil, invalidf("max.connections.per.ip.overrides: %q is not host:count", item)
		}
		host := strings.TrimSpace(item[:i])
		n, err := strconv.Atoi(strings.TrimSpace(item[i+1:]))
		if err != nil || n < 0 {
			return nil, invalidf("max.connections.per.ip.overrides: %q: count must be a non-negative integer", item)
		}
		for _, c := range host {
			// Kafka's Utils.validHostPattern: [0-9a-zA-Z\-%._:]*
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.ContainsRune("-%._:", c)) {
				return nil, invalidf("max.connections.per.ip.overrides contains invalid addresses : %s", host)
			}
		}
		out[host] = n
	}
	return out, nil
}

func connectionOverridesReason(v string) string {
	if _, err := ConnectionOverrides(v); err != nil {
		return err.Error()
	}
	return ""
}
