package meta

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"testing"
)

// partitionEvents returns the put events of topics*parts partition keys,
// each with the state a one-broker cluster writes (replicas and ISR [1],
// broker 1's epoch in ISREpochs).
func partitionEvents(topics, parts int, epoch int64) []event {
	var evs []event
	for t := range topics {
		id := fmt.Sprintf("%08d-87b7-4508-adf5-c94287f98370", t)
		for p := range parts {
			st := fmt.Sprintf(`{"replicas":[1],"isr":[1],"leader":1,"leader_epoch":1,"partition_epoch":1,"elected_broker":1,"elected_broker_epoch":%d,"isr_epochs":{"1":%d}}`, epoch, epoch)
			evs = append(evs, event{key: DefaultKeys.Partition(TopicPartition{TopicID: id, Partition: int32(p)}), value: []byte(st), createRev: 2, modRev: 2})
		}
	}
	return evs
}

// TestViewSharesEqualStateValues: partitions with equal replica lists and
// ISR epochs share them (issue 18, intern.go), a state with other values
// gets its own, and a change that starts from Clone leaves the others as
// they were.
func TestViewSharesEqualStateValues(t *testing.T) {
	evs := partitionEvents(1, 3, 7)
	evs = append(evs, event{key: DefaultKeys.Partition(TopicPartition{TopicID: "other", Partition: 0}),
		value: []byte(`{"replicas":[1,2],"isr":[2],"leader":2,"isr_epochs":{"2":9}}`), createRev: 3, modRev: 3})
	v, err := NewView().apply(DefaultKeys, 3, evs)
	if err != nil {
		t.Fatal(err)
	}
	var ps []Partition
	for _, p := range v.Parts {
		if len(p) == 3 {
			ps = p
		}
	}
	a, b := ps[0].State, ps[2].State
	if &a.Replicas[0] != &b.Replicas[0] || &a.ISR[0] != &b.ISR[0] || &a.Replicas[0] != &a.ISR[0] {
		t.Fatalf("equal lists not shared: %p %p %p %p", a.Replicas, b.Replicas, a.ISR, b.ISR)
	}
	if reflect.ValueOf(a.ISREpochs).UnsafePointer() != reflect.ValueOf(b.ISREpochs).UnsafePointer() {
		t.Fatal("equal ISR epochs not shared")
	}
	if cap(a.Replicas) != len(a.Replicas) {
		t.Fatalf("shared list has room to append in place: cap %d", cap(a.Replicas))
	}
	o := v.Parts["other"][0].State
	if !slices.Equal(o.Replicas, []int32{1, 2}) || !slices.Equal(o.ISR, []int32{2}) || !maps.Equal(o.ISREpochs, map[int32]int64{2: 9}) {
		t.Fatalf("other state %v %v", o, o.ISREpochs)
	}
	if ps[0].TopicID != ps[1].TopicID || reflect.ValueOf(ps[0].TopicID).String() != ps[1].TopicID {
		t.Fatal("topic ids differ")
	}
	c := a.Clone()
	c.ISR[0], c.ISREpochs[1] = 5, 5
	c.Replicas = append(c.Replicas, 3)
	if b := ps[1].State; !slices.Equal(b.ISR, []int32{1}) || !slices.Equal(b.Replicas, []int32{1}) || b.ISREpochs[1] != 7 {
		t.Fatalf("a change of a clone reached a shared value: %v %v", b, b.ISREpochs)
	}
}

// TestViewHeapPerPartition reports the heap a view of 10,100 partitions
// holds per partition (issue 18's broker: ten topics of 1,000 partitions
// and the internal topics), after a restart's rewrite of every state came
// through the watch. It fails only past a generous bound (a view that
// stopped sharing, or grew a per-partition allocation, shows here first).
func TestViewHeapPerPartition(t *testing.T) {
	const topics, parts = 10, 1010
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	v, err := NewView().apply(DefaultKeys, 2, partitionEvents(topics, parts, 4))
	if err != nil {
		t.Fatal(err)
	}
	v, err = v.apply(DefaultKeys, 3, partitionEvents(topics, parts, 18))
	if err != nil {
		t.Fatal(err)
	}
	per := float64(heap()-before) / (topics * parts)
	runtime.KeepAlive(v)
	t.Logf("view heap: %.0f bytes per partition (%d partitions)", per, topics*parts)
	if per > 400 {
		t.Fatalf("view heap %.0f bytes per partition, want at most 400", per)
	}
}
