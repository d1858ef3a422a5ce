package txn

import (
	"reflect"
	"testing"
)

// FuzzDecodeStateRecord feeds arbitrary keys and values to the
// __transaction_state record decoder: it must not panic, and what it
// accepts must survive an encode/decode round trip (v0).
func FuzzDecodeStateRecord(f *testing.F) {
	for _, tr := range []transit{
		{producerID: 1, epoch: 0, timeoutMs: 60000, state: stateEmpty, startMs: -1, lastUpdateMs: 5},
		{producerID: 7, epoch: 3, timeoutMs: 1000, state: stateOngoing, startMs: 9, lastUpdateMs: 10,
			parts: []TopicPartition{{"a", 0}, {"a", 1}, {"b", 7}}},
		{producerID: 7, epoch: 3, timeoutMs: 1000, state: statePrepareCommit, startMs: 9, lastUpdateMs: 11,
			parts: []TopicPartition{{"__consumer_offsets", 4}}},
		{producerID: 1 << 40, epoch: 32766, timeoutMs: 900000, state: stateCompleteAbort, startMs: 9, lastUpdateMs: 12},
	} {
		f.Add(stateKey("tx-1"), stateValue(tr))
	}
	f.Add(stateKey("tombstone"), []byte(nil))
	f.Add([]byte{0, 1, 0, 1, 'g'}, []byte{0, 3})
	f.Add([]byte{0, 0, 0xff, 0xff}, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 9, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 2, 'i', 'd'}, []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		rec, ok, err := decodeStateRecord(key, value)
		if err != nil || !ok || rec.meta == nil {
			return
		}
		m := rec.meta
		tr := transit{producerID: m.producerID, epoch: m.epoch, timeoutMs: m.timeoutMs, state: m.state,
			parts: sortedParts(m.parts), startMs: m.startMs, lastUpdateMs: m.lastUpdateMs}
		again, ok, err := decodeStateRecord(stateKey(rec.id), stateValue(tr))
		if err != nil || !ok || again.id != rec.id {
			t.Fatalf("re-decode of %q: ok %v err %v", rec.id, ok, err)
		}
		if !reflect.DeepEqual(again.meta, m) {
			t.Fatalf("round trip changed metadata:\n%+v\n%+v", m, again.meta)
		}
	})
}
