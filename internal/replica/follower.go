package replica

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// NoEpoch is an unknown leader epoch (Kafka's UNDEFINED_EPOCH).
const NoEpoch int32 = -1

// EpochEnd is a leader epoch and the offset where it ends (Kafka's
// EpochEndOffset): the diverging epoch of a Fetch response and the answer
// of OffsetForLeaderEpoch.
type EpochEnd struct {
	Epoch     int32
	EndOffset int64
}

// EpochLookup answers a log's leader epoch history (Kafka's
// LeaderEpochFileCache.endOffsetFor, storage.Log.EndOffsetForEpoch): the
// largest known epoch <= epoch and the offset where the next one starts
// (the log end offset for the latest epoch), or (-1, -1).
type EpochLookup func(epoch int32) (int32, int64)

// CheckLeaderEpoch is KIP-320's fencing of a request's current leader
// epoch against this replica's (-1 in the request: not checked): older is
// FENCED_LEADER_EPOCH (the sender's metadata is stale), newer
// UNKNOWN_LEADER_EPOCH (this broker's is; the sender retries).
func CheckLeaderEpoch(requested, current int32) error {
	switch {
	case requested < 0 || requested == current:
		return nil
	case requested < current:
		return fmt.Errorf("leader epoch %d is older than the current %d: %w", requested, current, kerr.FencedLeaderEpoch)
	default:
		return fmt.Errorf("leader epoch %d is newer than the current %d: %w", requested, current, kerr.UnknownLeaderEpoch)
	}
}

// Divergence is the leader's check of a follower fetch that carries the
// epoch of the follower's last fetched batch (Fetch v12+, KIP-595's
// truncation on fetch adopted by replication in KAFKA-10554; Kafka's
// Partition.readRecords). The leader looks the epoch up in its own
// history: when it knows a smaller epoch only, or the epoch ends on the
// leader before the follower's fetch offset, the follower's log diverges
// and the answer is that epoch and its end, with no records; the follower
// then truncates (Truncate) and fetches again. nil means the logs agree up
// to fetchOffset. An epoch the leader cannot place, or a fetch offset below
// the leader's log start, wraps OFFSET_OUT_OF_RANGE.
func Divergence(lastFetchedEpoch int32, fetchOffset, logStart int64, leader EpochLookup) (*EpochEnd, error) {
	if lastFetchedEpoch < 0 {
		return nil, nil
	}
	epoch, end := leader(lastFetchedEpoch)
	if epoch < 0 || end < 0 {
		return nil, fmt.Errorf("the end offset of last fetched epoch %d is unknown: %w", lastFetchedEpoch, kerr.OffsetOutOfRange)
	}
	if fetchOffset < logStart {
		return nil, fmt.Errorf("fetch offset %d below log start %d: %w", fetchOffset, logStart, kerr.OffsetOutOfRange)
	}
	if epoch < lastFetchedEpoch || end < fetchOffset {
		return &EpochEnd{Epoch: epoch, EndOffset: end}, nil
	}
	return nil, nil
}

// Truncation is where a follower cuts its log.
type Truncation struct {
	Offset int64
	// Complete is false when the follower does not know the epoch the
	// leader answered: it cut to the end of its own largest smaller epoch
	// and must ask again (KIP-279's iteration).
	Complete bool
}

// Truncate is the follower's reaction to the leader's end of an epoch
// (a diverging epoch in a Fetch response, or an OffsetForLeaderEpoch
// answer): Kafka's AbstractFetcherThread.getOffsetTruncationState.
//   - The follower knows the leader's epoch: it truncates to the smaller
//     of the two ends of that epoch (KIP-101: never to its high watermark,
//     which lost committed records).
//   - It does not (its largest epoch below the leader's is older): it
//     truncates to the end of that older epoch and asks again (KIP-279:
//     after fast leader changes one round is not enough).
//   - It knows no epoch that old: the leader's offset is used.
//   - The leader cannot place the epoch: nothing is truncated (see below).
//
// The offset is never above the follower's log end offset.
func Truncate(leader EpochEnd, localEnd int64, local EpochLookup) Truncation {
	switch {
	case leader.EndOffset < 0:
		// The leader cannot place the epoch (Kafka would fall back to the
		// high watermark, KIP-101's data loss): truncate nothing; the next
		// fetch gets OFFSET_OUT_OF_RANGE and OutOfRange decides from the
		// leader's start and end offsets.
		return Truncation{Offset: localEnd, Complete: true}
	case leader.Epoch < 0:
		// An offset without an epoch (OffsetForLeaderEpoch v0).
		return Truncation{Offset: min(leader.EndOffset, localEnd), Complete: true}
	}
	epoch, end := local(leader.Epoch)
	switch {
	case epoch < 0 || end < 0:
		return Truncation{Offset: min(leader.EndOffset, localEnd), Complete: true}
	case epoch != leader.Epoch:
		return Truncation{Offset: min(end, localEnd), Complete: false}
	default:
		return Truncation{Offset: min(end, leader.EndOffset, localEnd), Complete: true}
	}
}

// Reset is a follower's new position after OFFSET_OUT_OF_RANGE.
type Reset struct {
	// TruncateTo, when >= 0, cuts the log there first.
	TruncateTo int64
	// StartAt, when >= 0, empties the log and restarts it at that offset
	// (Kafka's truncateFullyAndStartAt).
	StartAt int64
	// FetchOffset is where fetching resumes.
	FetchOffset int64
}

// OutOfRange is Kafka's AbstractFetcherThread.fetchOffsetAndTruncate: a
// follower whose fetch offset is outside the leader's log asked the leader
// for its start and end offsets. Ahead of the leader's end (possible only
// after an unclean election) it truncates to that end; behind the
// leader's start (it was away while retention deleted what it misses) it
// empties its log and starts at the leader's start; otherwise it resumes
// from its own end.
func OutOfRange(localEnd, leaderStart, leaderEnd int64) Reset {
	switch {
	case leaderEnd < localEnd:
		return Reset{TruncateTo: leaderEnd, StartAt: -1, FetchOffset: leaderEnd}
	case leaderStart > localEnd:
		return Reset{TruncateTo: -1, StartAt: leaderStart, FetchOffset: leaderStart}
	default:
		return Reset{TruncateTo: -1, StartAt: -1, FetchOffset: localEnd}
	}
}

// FetchPosition is where a follower fetches from next when its leader does
// not count a separately reported fsynced end (PlanFetch without the
// echo of DurableEndTag). Under strata.durable.acks it fetches only once
// everything it appended is fsynced, so the offset it reports to the
// leader is its fsynced end: the leader then counts only durable copies.
// ready is false while an fsync is outstanding.
func FetchPosition(local Local, durable bool) (offset int64, ready bool) {
	if durable && local.Durable < local.End {
		return local.Durable, false
	}
	return local.End, true
}

// FollowerHighWatermark is a follower's high watermark: the leader's,
// capped by its own log end (KafkaReplication.tla FollowerReplicate;
// UnifiedLog.maybeUpdateHighWatermark), and under strata.durable.acks by
// its fsynced end, so that a consumer reading from a follower (KIP-392)
// never sees a record this replica could lose.
func FollowerHighWatermark(leaderHW int64, local Local, durable bool) int64 {
	end := local.End
	if durable {
		end = min(end, local.Durable)
	}
	return max(min(leaderHW, end), local.Start)
}

// DurableEndTag is the tagged field by which a Strata follower reports its
// fsynced end in every partition of its Fetch (FetchRequest partition,
// flexible versions v12+), and by which a Strata leader, in that partition
// of its answer (FetchResponse partition), echoes the fsynced end it
// recorded. The value is a big-endian int64 offset. It is Strata to Strata
// only: clients never send it, Kafka brokers skip it as an unknown tag
// (KIP-482: unknown tagged fields are ignored), and its number is far
// from Kafka's own tags in these structs (0 to 2). A follower learns from
// the echo that the leader counts its fsynced end apart from its fetch
// offset, and only then fetches from its log end before its fsync
// completes (PlanFetch); a leader that does not echo (an older Strata)
// counts the fetch offset as fsynced, so the follower keeps fetching from
// its fsynced end.
const DurableEndTag uint32 = 0x5354

// DurableEndValue is the value of DurableEndTag for offset end.
func DurableEndValue(end int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(end))
}

// DurableEndOf returns the offset a DurableEndTag in tags carries.
func DurableEndOf(tags *kmsg.Tags) (end int64, ok bool) {
	tags.Each(func(k uint32, v []byte) {
		if k == DurableEndTag && len(v) == 8 {
			end, ok = int64(binary.BigEndian.Uint64(v)), true
		}
	})
	return end, ok
}

// Plan is what a follower sends next for one partition.
type Plan struct {
	// Offset is the fetch offset.
	Offset int64
	// Durable is the fsynced end sent with DurableEndTag (NoOffset: none).
	Durable int64
	// NoWait asks the leader to answer at once (MaxWaitMillis 0) rather
	// than park the fetch until new data arrives: the follower has an fsync
	// outstanding whose completion it must report soon.
	NoWait bool
	// Ready is false while the partition waits for its own fsync first.
	Ready bool
}

// PlanFetch is a follower's next fetch of a partition (the pipelining
// rule of docs/replication.md).
//
// Kafka's follower fetches again as soon as it appended, from its new log
// end (AbstractFetcherThread.processFetchRequest, then the next doWork);
// the leader takes that offset as the follower's log end
// (Replica.updateFetchState) for what it sends next and for the caught-up
// time that keeps it in the ISR. With strata.durable.acks=false that is
// the rule exactly.
//
// Under strata.durable.acks a follower reports as replicated only what it
// fsynced. With a leader that counts a separately reported fsynced end
// (pipelined: it echoed DurableEndTag) the follower still fetches from its
// log end as Kafka's does, with its fsynced end in DurableEndTag, so that
// its fsyncs (the log's group commit, in the background) overlap its next
// fetches instead of running between them:
//   - while an fsync is outstanding the fetch asks for no wait: the leader
//     must not park a fetch whose report of a completed fsync may move its
//     high watermark;
//   - once such a fetch came back empty (drained) the follower waits for
//     its next fsync completion (the log's fsync hook wakes the fetcher)
//     and reports it at once, not waiting for fsyncs of later appends;
//     with nothing left unsynced it fetches normally.
//
// A catching-up follower thus copies at the rate of fetch and append,
// its fsyncs following behind; it joins the ISR only once its fsynced end
// reaches the high watermark (Leader.maybeExpandISR). A follower whose
// fsyncs stop completing leaves the ISR by the leader's durableProgress
// rule. Without the echo (a leader that counts the fetch offset as
// fsynced) the follower fetches from its fsynced end, and only once its
// fsync completed.
func PlanFetch(local Local, durable, pipelined, drained bool) Plan {
	if !durable {
		return Plan{Offset: local.End, Durable: NoOffset, Ready: true}
	}
	d := min(local.Durable, local.End)
	if !pipelined {
		return Plan{Offset: d, Durable: d, Ready: d >= local.End}
	}
	unsynced := d < local.End
	return Plan{Offset: local.End, Durable: d, NoWait: unsynced, Ready: !unsynced || !drained}
}
