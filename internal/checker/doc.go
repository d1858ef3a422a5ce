// Package checker finds anomalies in a history of Kafka client operations,
// in the spirit of Jepsen's Kafka queue workload (jepsen.tests.kafka). It
// knows nothing of Strata: it reads only what clients saw, so the same
// checker judges Strata, kfake or Apache Kafka, driven by real processes
// (internal/workload) or by a deterministic simulation.
//
// # The history
//
// A History is a list of completed operations (Op), each with a Process (a
// producer or a consumer session whose operations are sequential), a Kind, a
// Status as the client saw it (OK, Fail, Unknown) and an interval [Start,
// End] on one monotonic clock containing the moment it took effect:
//
//   - KindSend: records sent outside a transaction, each with the offset the
//     acknowledgement carried (NoOffset if none). Idempotent marks an
//     idempotent producer.
//   - KindPoll: the records one poll returned, in order, with the session's
//     isolation level (ReadCommitted).
//   - KindTxn: a producer transaction: its sends, Commit (EndTxn asked to
//     commit) and EndStart (when EndTxn was invoked); Status OK means the
//     commit succeeded, Fail that the abort did, Unknown anything else. A
//     consume-transform-produce transaction also lists the records it
//     consumed (Reads, with Group) and the offsets it committed; the session
//     records the same records as a KindPoll too, which is what the session
//     and read checks look at.
//   - KindAssign, KindSeek, KindRebalance: a consumer session was
//     repositioned; reads after it need not continue from the previous one.
//   - KindNemesis: a fault (informational; listed in reports).
//
// Values must be unique across a history: a record is identified by its
// value. Use Recorder to build a history from concurrent clients;
// WriteJSONL/ReadJSONL store it.
//
// # What Check reports
//
// Every Anomaly names the operations (history indexes) that show it.
//
//   - lost-write: an acknowledged record that nobody read although some
//     reader read a record at or past its offset.
//   - unseen-write: an acknowledged record nobody read at all. An anomaly only
//     when Options.Drained says the history ends with a read of every
//     partition from start to end after the faults healed; otherwise counted.
//   - inconsistent-offset: one offset of a partition reported (by an
//     acknowledgement or a read) with two different values.
//   - duplicate: a record of an idempotent or transactional producer stored
//     at two offsets (counted, not reported, for other producers).
//   - poll-skip / poll-nonmonotonic: within one consumer session, a
//     partition's next record is not the next one visible at the session's
//     isolation level (a record known to exist between was jumped over), or
//     goes back or repeats, with no assign, seek or rebalance between.
//   - aborted-read: a record of a definitely failed send seen by anyone, or of
//     an aborted transaction seen by a READ_COMMITTED reader.
//   - uncommitted-read: a READ_COMMITTED poll returned a transactional record
//     before its transaction asked to commit (or of one that never did).
//   - non-atomic-txn: after a drain, READ_COMMITTED readers saw some but not
//     all records of a transaction that asked to commit.
//   - txn-double-processing: one consumed record processed by two committed
//     transactions of the same group (offset commits not atomic with the
//     transaction: exactly-once broken).
//   - send-reorder: an idempotent producer's acknowledged records to one
//     partition got offsets out of the order it sent them.
//   - phantom-read: a value read that no client sent, or read in a partition
//     it was not sent to.
//   - offset-order / nonlinearizable: offsets within a partition are not
//     linearizable: an append got an offset at or below one acknowledged
//     before it began, or a poll returned an offset before any send reaching
//     it began. offset-order names the pair directly; porcupine
//     (PartitionLogModel) checks the whole partition and reports
//     nonlinearizable when only the full search finds a violation.
//
// # For the simulation and the cluster fault matrix
//
// A deterministic simulation records the same Ops (with its fake clock as
// Start/End) and calls Check; a seed's history written with WriteJSONL is
// its regression record. Further linearizability claims (etcd-backed
// metadata: topic creation, leader epochs, group offsets) add a porcupine
// Model beside PartitionLogModel and feed it their own operations; the
// report's Stats.Linearizability carries one verdict per checked object.
package checker
