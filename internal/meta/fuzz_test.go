package meta

import (
	"testing"
)

// FuzzViewApply feeds arbitrary etcd keys and values (what the cache's
// watch decodes into the view: broker registrations, topics, partition
// states, broker configs, controller candidates, ACLs, quotas, SCRAM
// credentials, deletions) to View.apply: it must return a view or an
// error, never panic or allocate without bound, and the view's readers
// must work on whatever it accepted.
func FuzzViewApply(f *testing.F) {
	k := DefaultKeys
	f.Add(k.Broker(1), []byte(`{"id":1,"listeners":[]}`), k.Topic("t"), []byte(`{"name":"t","id":"x","partitions":2}`), "/strata/partitions/x/1", []byte(`{"replicas":[1],"isr":[1],"leader":1}`), byte(0))
	f.Add("/strata/partitions/x/-1", []byte(`{"leader":1}`), k.Topic("t"), []byte(`{"name":"t","id":"x","partitions":1}`), "/strata/partitions/x/0", []byte(`{}`), byte(0))
	f.Add("/strata/partitions/x/2147483647", []byte(`{"leader":1}`), "/strata/partitions/x/0", []byte(nil), k.Topic("t"), []byte(`null`), byte(2))
	f.Add(k.BrokerConfig(DefaultBrokerScope), []byte(`{"a":"b"}`), "/strata/controller/1", []byte(`3`), k.ScramUser("u/x"), []byte(`{"SCRAM-SHA-256":{}}`), byte(0))
	f.Add("/strata/acls/a", []byte(`{}`), "/strata/quotas/q", []byte(`{"entity":[]}`), k.Deletion("x", 2), []byte{}, byte(4))
	f.Fuzz(func(t *testing.T, k1 string, v1 []byte, k2 string, v2 []byte, k3 string, v3 []byte, deletes byte) {
		evs := []event{{key: k1, value: v1}, {key: k2, value: v2}, {key: k3, value: v3}}
		for i := range evs {
			evs[i].createRev, evs[i].modRev = int64(i+1), int64(i+1)
			if deletes&(1<<i) != 0 {
				evs[i].value = nil // a delete event
			} else if evs[i].value == nil {
				evs[i].value = []byte{}
			}
		}
		v := NewView()
		// Twice: the second applies over a view holding the first's keys.
		for round := 0; round < 2; round++ {
			nv, err := v.apply(k, int64(round+1), evs)
			if err != nil {
				return
			}
			v = nv
			for _, name := range v.TopicNames() {
				tp := v.Topics[name]
				for p := int32(-1); p <= tp.Partitions && p < 4; p++ {
					v.Partition(name, p)
				}
			}
			for id, ps := range v.Parts {
				if len(ps) > maxPartitionsPerTopic {
					t.Fatalf("topic %s: %d partition slots", id, len(ps))
				}
			}
			v.PartitionCount()
			v.OfflinePartitions()
			v.BrokerIDs()
		}
	})
}

// TestBadPartitionKeysRefused: a partition key with a negative number
// panicked the metadata cache's watch (an index -1), one naming partition
// 2147483647 grew the topic's slice to two billion entries (both found by
// FuzzViewApply); both are refused as bad keys now.
func TestBadPartitionKeysRefused(t *testing.T) {
	for _, key := range []string{"/strata/partitions/x/-1", "/strata/partitions/x/2147483647", "/strata/partitions/x/1048576"} {
		_, err := NewView().apply(DefaultKeys, 1, []event{{key: key, value: []byte(`{"leader":1}`), createRev: 1, modRev: 1}})
		if err == nil {
			t.Errorf("%s: accepted", key)
		}
	}
	v, err := NewView().apply(DefaultKeys, 1, []event{{key: "/strata/partitions/x/5", value: []byte(`{"leader":1}`), createRev: 1, modRev: 1}})
	if err != nil || len(v.Parts["x"]) != 6 {
		t.Fatalf("partition 5: %v", err)
	}
}
