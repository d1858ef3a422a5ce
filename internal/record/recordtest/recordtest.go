// Package recordtest builds record batches for tests: the numbering and
// header arithmetic every test batch needs, in one place.
package recordtest

import (
	"fmt"

	"github.com/strata-io/strata/internal/record"
)

// NoProducer is the header of a batch without a producer (producer id,
// epoch and base sequence -1) and no leader epoch (-1), as a plain client
// sends it; set BaseOffset, BaseTimestamp and Attributes on a copy.
var NoProducer = record.BatchHeader{PartitionLeaderEpoch: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

// Batch encodes recs as a batch with header h. It numbers the records
// (OffsetDelta i), sets LastOffsetDelta to len(recs)-1 and MaxTimestamp to
// BaseTimestamp plus the largest TimestampDelta; the codec is h's. It
// panics on an encoding error (test inputs are constants).
func Batch(h record.BatchHeader, recs ...record.Record) record.Batch {
	b, err := record.BuildNumbered(h, recs)
	if err != nil {
		panic(fmt.Sprintf("recordtest: %v", err))
	}
	return b
}

// Marker encodes a transaction marker (Kafka's EndTxnMarker control
// batch, KIP-98): a COMMIT or ABORT record of h's producer, written by
// coordinator epoch coordinatorEpoch. It sets the control and
// transactional attributes and base sequence -1.
func Marker(h record.BatchHeader, commit bool, coordinatorEpoch int32) record.Batch {
	typ := record.ControlAbort
	if commit {
		typ = record.ControlCommit
	}
	h.Attributes |= record.AttrControl | record.AttrTransactional
	h.BaseSequence = -1
	return Batch(h, record.EndTxnMarker(typ, coordinatorEpoch))
}
