package recordtest

import (
	"testing"

	"github.com/strata-io/strata/internal/record"
)

// TestBatchAndMarker checks the header arithmetic against the decoder.
func TestBatchAndMarker(t *testing.T) {
	h := NoProducer
	h.BaseOffset, h.BaseTimestamp = 10, 1000
	b := Batch(h, record.Record{Value: []byte("a")}, record.Record{TimestampDelta: 5, Value: []byte("b")})
	if err := record.Validate(b); err != nil {
		t.Fatal(err)
	}
	if b.LastOffset() != 11 || b.MaxTimestamp() != 1005 || b.ProducerID() != -1 || b.NumRecords() != 2 {
		t.Fatalf("last offset %d, max timestamp %d, producer %d, records %d", b.LastOffset(), b.MaxTimestamp(), b.ProducerID(), b.NumRecords())
	}
	m := Marker(record.BatchHeader{ProducerID: 7, ProducerEpoch: 2, BaseTimestamp: 50}, true, 3)
	recs, err := m.Records()
	if err != nil || len(recs) != 1 || !m.IsControl() || !m.IsTransactional() || m.BaseSequence() != -1 {
		t.Fatalf("marker: %v %d records", err, len(recs))
	}
	if typ, err := record.ParseControlKey(recs[0].Key); err != nil || typ != record.ControlCommit {
		t.Fatalf("marker type %v %v", typ, err)
	}
	if ce, err := record.ParseEndTxnMarker(recs[0].Value); err != nil || ce != 3 {
		t.Fatalf("coordinator epoch %d %v", ce, err)
	}
}
