// Package replica holds Strata's replication decisions for one partition:
// Kafka's in-sync-replica protocol as pure state machines, with no I/O and
// no clock of their own, so that transcript tests (testdata/*.txt) can drive
// them step by step as etcd raft's interaction tests drive raft.
//
// The leader side (Leader) is Kafka's Partition/Replica leader logic:
// follower fetch state per replica (Replica.updateFetchStateOrThrow), the
// ISR expand and shrink decisions (Partition.maybeExpandIsr,
// maybeShrinkIsr with replica.lag.time.max.ms), the high watermark
// (Partition.maybeIncrementLeaderHW, which never advances while the ISR is
// below min.insync.replicas: KIP-966 / KAFKA-15583), acks=all completion
// (Partition.checkEnoughReplicasReachOffset) and the refusal of acks=all
// appends with NOT_ENOUGH_REPLICAS. ISR changes leave the leader as
// proposals (IsrChange) to be committed by compare-and-set on the
// partition's metadata key, with the partition epoch as the version
// (KIP-497's AlterPartition); while one is in flight no other is made and
// the high watermark counts the "maximal" ISR.
//
// Strata's durability rule (strata.durable.acks=true, the default): a
// follower fetches from the offset up to which its log is fsynced, so the
// offset the leader records for it is its durable end, and the leader's own
// end in the high watermark computation is its fsynced end. The high
// watermark is then the lowest fsynced end across the ISR: a power cut of
// every replica at once loses nothing acknowledged. With the setting false
// the leader's log end offset counts, as in Kafka.
//
// The follower side (Follower functions) is Kafka's AbstractFetcherThread
// truncation logic: a follower never truncates to its high watermark
// (the data loss of KIP-101); it truncates where its leader epoch history
// diverges from the leader's, learned from the diverging epoch of a Fetch
// v12+ response or from OffsetForLeaderEpoch (KIP-101, KIP-279:
// getOffsetTruncationState), and its own high watermark is the leader's
// capped by its own end (KafkaReplication.tla FollowerReplicate).
//
// The TLA+ models of these rules are hachikuji/kafka-specification
// (KafkaReplication.tla, Kip101.tla, Kip279.tla, Kip320.tla); the
// transcripts in testdata replay the scenarios those models found.
package replica
