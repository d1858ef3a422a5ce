package txn

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/storage"
)

// __transaction_state record schemas, as Kafka 3.x writes them
// (TransactionLog.scala): key version 0 (transactional id), value version
// 0. A null value is a tombstone (an expired transactional id).
const (
	keyVersion   = 0
	valueVersion = 0
)

func stateKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: keyVersion, TransactionalID: id}
	return k.AppendTo(nil)
}

// stateValue encodes tr. Kafka writes a null partition list for Empty and
// the partitions grouped by topic otherwise.
func stateValue(tr transit) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID = tr.producerID
	v.ProducerEpoch = tr.epoch
	v.TimeoutMillis = tr.timeoutMs
	v.State = kmsg.TransactionState(tr.state)
	if tr.state != stateEmpty {
		v.Topics = []kmsg.TxnMetadataValueTopic{}
		for _, tp := range tr.parts {
			n := len(v.Topics)
			if n == 0 || v.Topics[n-1].Topic != tp.Topic {
				t := kmsg.NewTxnMetadataValueTopic()
				t.Topic = tp.Topic
				v.Topics = append(v.Topics, t)
				n++
			}
			v.Topics[n-1].Partitions = append(v.Topics[n-1].Partitions, tp.Partition)
		}
	}
	v.LastUpdateTimestamp = tr.lastUpdateMs
	v.StartTimestamp = tr.startMs
	return v.AppendTo(nil)
}

// buildBatch wraps records into one uncompressed v2 batch with offsets
// from 0 (the log assigns the real ones), as Kafka's
// MemoryRecords.withRecords does for the transaction log.
func buildBatch(now time.Time, recs []record.Record) ([]byte, error) {
	h := record.BatchHeader{
		BaseTimestamp: now.UnixMilli(),
		ProducerID:    -1,
		ProducerEpoch: -1,
		BaseSequence:  -1,
	}
	b, err := record.BuildNumbered(h, recs)
	if err != nil {
		return nil, fmt.Errorf("build __transaction_state batch: %w", err)
	}
	return b, nil
}

// stateRecord is one decoded __transaction_state record: meta is nil for a
// tombstone.
type stateRecord struct {
	id   string
	meta *txnMeta
}

// decodeStateRecord decodes one __transaction_state record (Kafka's
// TransactionLog.readTxnRecordKey/readTxnRecordValue). ok is false for
// keys of other versions, which are not transaction records and are
// skipped, as Kafka does.
func decodeStateRecord(key, value []byte) (rec stateRecord, ok bool, err error) {
	if len(key) < 2 {
		return rec, false, fmt.Errorf("__transaction_state key of %d bytes", len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != keyVersion {
		return rec, false, nil
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return rec, false, fmt.Errorf("decode transaction key: %w", err)
	}
	rec.id = k.TransactionalID
	if value == nil {
		return rec, true, nil
	}
	if len(value) < 2 {
		return rec, false, fmt.Errorf("transaction value of %s: %d bytes", k.TransactionalID, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 || v > 1 {
		return rec, false, fmt.Errorf("transaction value of %s: unknown version %d", k.TransactionalID, v)
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(value); err != nil {
		return rec, false, fmt.Errorf("decode transaction value of %s: %w", k.TransactionalID, err)
	}
	s := state(v.State)
	if s < 0 || s >= numStates {
		return rec, false, fmt.Errorf("transaction value of %s: unknown state %d", k.TransactionalID, v.State)
	}
	m := &txnMeta{
		id: k.TransactionalID, producerID: v.ProducerID, lastProducerID: -1,
		epoch: v.ProducerEpoch, lastEpoch: -1, timeoutMs: v.TimeoutMillis, state: s,
		parts: map[TopicPartition]struct{}{}, startMs: v.StartTimestamp, lastUpdateMs: v.LastUpdateTimestamp,
	}
	if s != stateEmpty {
		for _, t := range v.Topics {
			for _, p := range t.Partitions {
				m.parts[TopicPartition{Topic: t.Topic, Partition: p}] = struct{}{}
			}
		}
	}
	rec.meta = m
	return rec, true, nil
}

// replayer folds __transaction_state records into the latest metadata per
// transactional id.
type replayer struct {
	txns    map[string]*txnMeta
	records int
	skipped int
	lastErr error
}

func newReplayer() *replayer { return &replayer{txns: map[string]*txnMeta{}} }

// applyBatch folds every record of one batch. Control batches are skipped;
// undecodable records are counted and skipped rather than failing the
// load (only other writers of the topic can produce them).
func (r *replayer) applyBatch(b record.Batch) {
	if b.IsControl() {
		return
	}
	err := b.ForEachRecord(func(rec *record.Record) error {
		r.records++
		sr, ok, err := decodeStateRecord(rec.Key, rec.Value)
		if err != nil {
			r.skipped++
			r.lastErr = err
			return nil
		}
		if !ok {
			return nil
		}
		// Kafka never writes Dead or PrepareEpochFence; a Dead record
		// can only mean the id is gone.
		if sr.meta == nil || sr.meta.state == stateDead {
			delete(r.txns, sr.id)
			return nil
		}
		if sr.meta.state == statePrepareEpochFence {
			r.skipped++
			r.lastErr = fmt.Errorf("transaction %s: PrepareEpochFence is never persisted", sr.id)
			return nil
		}
		r.txns[sr.id] = sr.meta
		return nil
	})
	if err != nil {
		r.skipped++
		r.lastErr = err
	}
}

// loadCommitWait bounds how long LoadPartition waits, after replaying a
// partition, for its high watermark to reach what it replayed: the state
// past the high watermark is not committed, so it is not served until it
// is (the group coordinator's rule, internal/group loadCommitWait).
const loadCommitWait = 5 * time.Second

// replayLog reads partition log l from its start to its end (past the
// high watermark: a new leader loads all its log holds, as Kafka's
// loaders), hands each batch to fn and returns the offset after the last
// batch.
func replayLog(l *storage.Log, fn func(b record.Batch)) (end int64, err error) {
	return l.ScanBatchesToEnd(func(b record.Batch) error { fn(b); return nil })
}
