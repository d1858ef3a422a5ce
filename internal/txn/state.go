package txn

import (
	"math"
	"slices"
	"strings"
)

// state is a transaction state; the values are Kafka's ids (the
// TransactionStatus byte of TxnMetadataValue).
type state int8

// Kafka's transaction states (TransactionMetadata.scala).
const (
	stateEmpty state = iota
	stateOngoing
	statePrepareCommit
	statePrepareAbort
	stateCompleteCommit
	stateCompleteAbort
	stateDead
	statePrepareEpochFence
	numStates
)

var stateNames = [numStates]string{
	"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
	"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence",
}

// String is the state's name as DescribeTransactions and ListTransactions
// report it.
func (s state) String() string {
	if s >= 0 && s < numStates {
		return stateNames[s]
	}
	return "Unknown"
}

// stateFromName parses a ListTransactions state filter.
func stateFromName(name string) (state, bool) {
	for i, n := range stateNames {
		if n == name {
			return state(i), true
		}
	}
	return 0, false
}

// validPrevious reports whether prev may transition to s (Kafka's
// TransactionState.validPreviousStates).
func (s state) validPrevious(prev state) bool {
	switch s {
	case stateEmpty:
		return prev == stateEmpty || prev == stateCompleteCommit || prev == stateCompleteAbort
	case stateOngoing:
		return prev == stateOngoing || prev == stateEmpty || prev == stateCompleteCommit || prev == stateCompleteAbort
	case statePrepareCommit:
		return prev == stateOngoing
	case statePrepareAbort:
		return prev == stateOngoing || prev == statePrepareEpochFence
	case stateCompleteCommit:
		return prev == statePrepareCommit
	case stateCompleteAbort:
		return prev == statePrepareAbort
	case stateDead:
		return prev == stateEmpty || prev == stateCompleteCommit || prev == stateCompleteAbort
	case statePrepareEpochFence:
		return prev == stateOngoing
	}
	return false
}

// expirable reports whether an idle transactional id in this state may be
// expired (Kafka's isExpirationAllowed).
func (s state) expirable() bool {
	return s == stateEmpty || s == stateCompleteCommit || s == stateCompleteAbort
}

// epochExhausted is Kafka's TransactionMetadata.isEpochExhausted: clients
// never get Short.MaxValue so the coordinator can always fence once more.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// txnMeta is one transactional id's metadata (Kafka's TransactionMetadata).
// Guarded by Coordinator.mu.
type txnMeta struct {
	id             string
	producerID     int64
	lastProducerID int64
	epoch          int16
	lastEpoch      int16
	timeoutMs      int32
	state          state
	parts          map[TopicPartition]struct{}
	startMs        int64 // -1 when no transaction started
	lastUpdateMs   int64

	// pending is the state a transition in flight moves to (Kafka's
	// pendingState); hasPending says whether one is in flight.
	pending    state
	hasPending bool
	// failedFence is Kafka's hasFailedEpochFence: a fencing abort bumped
	// the epoch in memory but its PrepareAbort was not written, so the
	// next fence must not bump it again.
	failedFence bool
}

func newMeta(id string, pid int64, timeoutMs int32, nowMs int64) *txnMeta {
	return &txnMeta{
		id: id, producerID: pid, lastProducerID: -1, epoch: -1, lastEpoch: -1,
		timeoutMs: timeoutMs, state: stateEmpty, parts: map[TopicPartition]struct{}{},
		startMs: -1, lastUpdateMs: nowMs,
	}
}

// transit is a target state of a transition (Kafka's TxnTransitMetadata):
// what is written to __transaction_state, then applied.
type transit struct {
	producerID     int64
	lastProducerID int64
	epoch          int16
	lastEpoch      int16
	timeoutMs      int32
	state          state
	parts          []TopicPartition // sorted
	startMs        int64
	lastUpdateMs   int64
}

// sortedParts returns the partition set sorted by topic then partition.
func sortedParts(set map[TopicPartition]struct{}) []TopicPartition {
	out := make([]TopicPartition, 0, len(set))
	for tp := range set {
		out = append(out, tp)
	}
	slices.SortFunc(out, compareTP)
	return out
}

func compareTP(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// prepare starts a transition of m to tr.state (Kafka's
// prepareTransitionTo): it marks the transition pending. It returns false
// (and changes nothing) when one is already pending or the transition is
// not a valid one; callers check both before, so false is a bug guard.
func (m *txnMeta) prepare(tr transit) bool {
	if m.hasPending || !tr.state.validPrevious(m.state) || tr.producerID < 0 {
		return false
	}
	if tr.state != stateDead && tr.epoch < 0 {
		return false
	}
	m.pending, m.hasPending = tr.state, true
	return true
}

// to builds a transit from m's current fields to state s with the given
// partitions, start and update times (the common part of Kafka's
// prepareXxx methods; lastProducerID is the current producer id, as
// Kafka's prepareTransitionTo records it).
func (m *txnMeta) to(s state, parts []TopicPartition, startMs, nowMs int64) transit {
	return transit{
		producerID: m.producerID, lastProducerID: m.producerID,
		epoch: m.epoch, lastEpoch: m.lastEpoch, timeoutMs: m.timeoutMs,
		state: s, parts: parts, startMs: startMs, lastUpdateMs: nowMs,
	}
}

// apply completes the pending transition to tr once it is durable (Kafka's
// completeTransitionTo).
func (m *txnMeta) apply(tr transit) {
	switch tr.state {
	case stateEmpty:
		m.producerID, m.lastProducerID = tr.producerID, tr.lastProducerID
		m.epoch, m.lastEpoch = tr.epoch, tr.lastEpoch
		m.timeoutMs = tr.timeoutMs
		m.startMs = -1
		clear(m.parts)
	case stateOngoing:
		m.startMs = tr.startMs
		for _, tp := range tr.parts {
			m.parts[tp] = struct{}{}
		}
	case stateCompleteCommit, stateCompleteAbort:
		m.startMs = tr.startMs
		clear(m.parts)
		m.failedFence = false
	}
	m.lastUpdateMs = tr.lastUpdateMs
	m.state = tr.state
	m.hasPending = false
}

// clearPending drops a transition that failed to be written.
func (m *txnMeta) clearPending() { m.hasPending = false }

// pendingIs reports whether a transition to s is in flight.
func (m *txnMeta) pendingIs(s state) bool { return m.hasPending && m.pending == s }
