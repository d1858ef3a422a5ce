// Package txn is Strata's transaction coordinator (KIP-98): it owns every
// __transaction_state partition of this node, answers InitProducerId for
// transactional ids, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// DescribeTransactions and ListTransactions, writes the COMMIT/ABORT
// markers through Deps, aborts timed-out transactions and expires idle
// transactional ids.
//
// The state machine and error codes follow Apache Kafka's
// TransactionCoordinator, TransactionMetadata and TransactionStateManager
// (Kafka 3.x, transaction version 1): every state change is appended to
// __transaction_state (TxnMetadataKey/TxnMetadataValue v0 records) and is
// applied in memory only once durable. A transition in flight is the
// transactional id's "pending" state; requests that would race with it get
// CONCURRENT_TRANSACTIONS, as in Kafka.
//
// Unlike Kafka, which answers EndTxn as soon as PrepareCommit/PrepareAbort
// is durable and writes the markers in the background, Strata writes the
// markers and the CompleteCommit/CompleteAbort record before answering (one
// node: the markers are local appends). A failure there leaves the
// transaction in PrepareCommit/PrepareAbort; the coordinator's loop retries
// it, as Load does for transactions a crash interrupted.
package txn
