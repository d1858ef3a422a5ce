package group

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
)

// Record schemas of __consumer_offsets, as Kafka writes them: offset commit
// key v1 with value v3 (v1 when the commit carries an explicit expire
// timestamp), group metadata key v2 with value v3. A null value is a
// tombstone.
const (
	offsetKeyVersion   = 1
	offsetValueVersion = 3
	groupKeyVersion    = 2
	groupValueVersion  = 3
)

func offsetKey(group string, k tp) []byte {
	key := kmsg.OffsetCommitKey{Version: offsetKeyVersion, Group: group, Topic: k.topic, Partition: k.partition}
	return key.AppendTo(nil)
}

func offsetValue(o offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetValueVersion
	v.Offset = o.offset
	v.LeaderEpoch = o.leaderEpoch
	v.Metadata = o.metadata
	v.CommitTimestamp = o.commitMs
	if o.expireMs >= 0 {
		v.Version = 1
		v.ExpireTimestamp = o.expireMs
	}
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	key := kmsg.GroupMetadataKey{Version: groupKeyVersion, Group: group}
	return key.AppendTo(nil)
}

// groupMetadata is the group's metadata as of now (Kafka stores only the
// selected protocol's subscription for each member).
func groupMetadata(g *group) *kmsg.GroupMetadataValue {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupValueVersion
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = g.stateTime.UnixMilli()
	for _, m := range g.members {
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID = m.id
		mv.InstanceID = m.instanceID
		mv.ClientID = m.clientID
		mv.ClientHost = m.clientHost
		mv.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		mv.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		mv.Subscription = m.metadataFor(g.protocol)
		if mv.Subscription == nil {
			mv.Subscription = []byte{}
		}
		mv.Assignment = m.assignment
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return &v
}

// buildBatch wraps key/value records into one uncompressed v2 batch with
// offsets from 0 (the log assigns the real ones).
func buildBatch(now time.Time, recs []record.Record) ([]byte, error) {
	return build(now, recs, -1, -1, 0)
}

// buildTxnBatch is buildBatch for transactional offset commits: the
// producer's id and epoch, the isTransactional attribute and baseSequence
// -1, as Kafka's group coordinator writes them.
func buildTxnBatch(now time.Time, pid int64, epoch int16, recs []record.Record) ([]byte, error) {
	return build(now, recs, pid, epoch, record.AttrTransactional)
}

func build(now time.Time, recs []record.Record, pid int64, epoch int16, attrs int16) ([]byte, error) {
	h := record.BatchHeader{
		Attributes:    attrs,
		BaseTimestamp: now.UnixMilli(),
		ProducerID:    pid,
		ProducerEpoch: epoch,
		BaseSequence:  -1,
	}
	b, err := record.BuildNumbered(h, recs)
	if err != nil {
		return nil, fmt.Errorf("build __consumer_offsets batch: %w", err)
	}
	return b, nil
}

// loadedGroup is one group's replayed state.
type loadedGroup struct {
	meta *kmsg.GroupMetadataValue
	// consumer holds the live KIP-848 records (types 3-8) by key.
	consumer map[string][]byte
	offsets  map[tp]offset
	txn      map[int64]map[tp]offset // pending transactional offsets by producer id
}

// replayer folds __consumer_offsets records into the latest state per key.
// Transactional offsets are held per producer until their partition's
// marker: COMMIT applies them (unless a later plain commit exists), ABORT
// drops them; those without a marker stay pending.
type replayer struct {
	groups  map[string]*loadedGroup
	records int
	skipped int // undecodable records or batches (written by other tools)
	lastErr error
	order   int64 // log order of the last record folded
	// open lists, per producer id, the groups holding its pending offsets
	// in the partition being replayed.
	open map[int64]map[string]bool
}

func newReplayer() *replayer {
	return &replayer{groups: map[string]*loadedGroup{}, open: map[int64]map[string]bool{}}
}

// nextPartition starts the replay of another partition: markers there
// complete only that partition's transactional offsets.
func (r *replayer) nextPartition() { r.open = map[int64]map[string]bool{} }

func (r *replayer) group(id string) *loadedGroup {
	lg := r.groups[id]
	if lg == nil {
		lg = &loadedGroup{offsets: map[tp]offset{}, txn: map[int64]map[tp]offset{}, consumer: map[string][]byte{}}
		r.groups[id] = lg
	}
	return lg
}

// apply folds one record; pid is the producer id of a transactional batch,
// else -1. KIP-848 records (types 3-8) are kept by key, the latest value
// of each (a tombstone removes it); keys of other types (share and streams
// groups, which Strata does not have) are skipped.
func (r *replayer) apply(key, value []byte, pid int64) error {
	if len(key) < 2 {
		return fmt.Errorf("__consumer_offsets key of %d bytes", len(key))
	}
	r.records++
	switch binary.BigEndian.Uint16(key) {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("decode offset commit key: %w", err)
		}
		lg := r.group(k.Group)
		at := tp{k.Topic, k.Partition}
		if value == nil {
			delete(lg.offsets, at)
			dropPending(lg.txn, at)
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("decode offset commit value of %s: %w", k.Group, err)
		}
		o := offset{offset: v.Offset, leaderEpoch: -1, metadata: v.Metadata, commitMs: v.CommitTimestamp, expireMs: -1}
		if v.Version >= 3 {
			o.leaderEpoch = v.LeaderEpoch
		}
		if v.Version == 1 {
			o.expireMs = v.ExpireTimestamp
		}
		r.order++
		o.order = r.order
		if pid < 0 {
			lg.offsets[at] = o
			return nil
		}
		if lg.txn[pid] == nil {
			lg.txn[pid] = map[tp]offset{}
		}
		lg.txn[pid][at] = o
		if r.open[pid] == nil {
			r.open[pid] = map[string]bool{}
		}
		r.open[pid][k.Group] = true
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return fmt.Errorf("decode group metadata key: %w", err)
		}
		if value == nil {
			lg := r.groups[k.Group]
			if lg != nil {
				lg.meta = nil
			}
			return nil
		}
		v := new(kmsg.GroupMetadataValue)
		if err := v.ReadFrom(value); err != nil {
			return fmt.Errorf("decode group metadata of %s: %w", k.Group, err)
		}
		r.group(k.Group).meta = v
	case 3, 4, 5, 6, 7, 8:
		k, err := validConsumerRecord(key, value)
		if err != nil {
			return err
		}
		lg := r.group(k.Group)
		if value == nil {
			delete(lg.consumer, string(key))
			return nil
		}
		lg.consumer[string(key)] = append([]byte(nil), value...)
	}
	return nil
}

// applyBatch folds every record of one batch. A transaction marker
// completes its producer's pending offsets; other control batches are
// skipped. Records Strata cannot decode are counted and skipped rather than
// failing the whole load: they can only come from other writers of the
// topic.
func (r *replayer) applyBatch(b record.Batch) error {
	if b.IsControl() {
		r.applyControl(b)
		return nil
	}
	pid := int64(-1)
	if b.IsTransactional() {
		pid = b.ProducerID()
	}
	err := b.ForEachRecord(func(rec *record.Record) error {
		if err := r.apply(rec.Key, rec.Value, pid); err != nil {
			r.skipped++
			r.lastErr = err
		}
		return nil
	})
	if err != nil {
		r.skipped++
		r.lastErr = err
	}
	return nil
}

// applyControl folds a control batch: COMMIT and ABORT markers end their
// producer's transaction in this partition.
func (r *replayer) applyControl(b record.Batch) {
	if !b.IsTransactional() {
		return
	}
	var typ record.ControlType = -1
	err := b.ForEachRecord(func(rec *record.Record) error {
		t, err := record.ParseControlKey(rec.Key)
		typ = t
		return err
	})
	if err != nil {
		r.skipped++
		r.lastErr = fmt.Errorf("decode control batch at %d: %w", b.BaseOffset(), err)
		return
	}
	if typ != record.ControlCommit && typ != record.ControlAbort {
		return
	}
	pid := b.ProducerID()
	for id := range r.open[pid] {
		lg := r.groups[id]
		pend := lg.txn[pid]
		delete(lg.txn, pid)
		if typ == record.ControlCommit {
			applyTxnOffsets(lg.offsets, pend)
		}
	}
	delete(r.open, pid)
}

// applyTxnOffsets moves a committed transaction's offsets into offs, each
// unless offs holds a commit written later in the log (Kafka keeps the most
// recent record of a key when plain and transactional commits mix). It
// returns how many were applied.
func applyTxnOffsets(offs, pend map[tp]offset) int {
	n := 0
	for k, o := range pend {
		if cur, ok := offs[k]; ok && cur.order > o.order {
			continue
		}
		offs[k] = o
		n++
	}
	return n
}

// dropPending removes k from every producer's pending offsets (a tombstone
// of the key deletes them too, as in Kafka).
func dropPending(txn map[int64]map[tp]offset, k tp) {
	for pid, m := range txn {
		delete(m, k)
		if len(m) == 0 {
			delete(txn, pid)
		}
	}
}

// Replayer is implemented by Storage values that are not backed by a
// storage.Log (test doubles); Load then reads batches from Replay.
type Replayer interface {
	Replay(partition int32, fn func(batch []byte) error) error
}

// loadCommitWait bounds how long LoadPartition waits, after replaying a
// partition, for its high watermark to reach what it replayed; past it
// the load fails (storage.ErrUncommitted) and the broker tries again (the
// partition's ISR cannot commit now, so no write would succeed either).
//
// A new leader loads its whole log (replayLog), but the records past the
// high watermark are not committed: another replica elected before they
// are replicated would not have them, and a coordinator serving them
// would later roll back what it showed (an offset fetched, a generation).
// Kafka's coordinator runtime likewise loads to the log end and serves
// only the state as of the last committed offset
// (CoordinatorLoaderImpl.processMemoryRecords, updateLastCommittedOffset);
// Strata keeps the partition COORDINATOR_LOAD_IN_PROGRESS until all it
// loaded is committed. The transaction coordinator follows the same rule.
const loadCommitWait = 5 * time.Second

// replayLog reads partition log l from its start to its end (past the
// high watermark, see loadCommitWait) and returns the offset after the
// last batch replayed.
func replayLog(l *storage.Log, fn func(batch []byte) error) (end int64, err error) {
	return l.ScanBatchesToEnd(func(b record.Batch) error { return fn(b) })
}
