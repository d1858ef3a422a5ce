package meta

import (
	"encoding/binary"
	"slices"
	"sort"
	"strings"
	"sync"
)

// interner shares equal values between the partition states of a view
// and of the views that follow it (issue 18: at 10,100 partitions each
// state's own ISREpochs map cost ~2 MB of a broker's heap and its own
// replica lists ~0.3 MB, while a cluster has few distinct ones: one
// broker's partitions all read {"1":E}). A view is immutable, and every
// change of a state starts from PartitionState.Clone, so values read from
// a view are never written and sharing them is safe. The table is dropped
// and started again when it grows past internEntries (values that no
// longer occur are not tracked one by one), so it stays bounded.
type interner struct {
	mu     sync.Mutex
	lists  map[string][]int32
	epochs map[string]map[int32]int64
	key    []byte
}

const (
	internMax     = 8       // longest list, largest map shared
	internEntries = 1 << 12 // entries of a table before it starts again
)

func newInterner() *interner {
	return &interner{lists: map[string][]int32{}, epochs: map[string]map[int32]int64{}}
}

// state returns st with its lists and ISR epochs shared with equal ones
// seen before.
func (in *interner) state(st PartitionState) PartitionState {
	in.mu.Lock()
	defer in.mu.Unlock()
	st.Replicas = in.list(st.Replicas)
	st.ISR = in.list(st.ISR)
	st.ELR = in.list(st.ELR)
	st.LastKnownELR = in.list(st.LastKnownELR)
	st.Adding = in.list(st.Adding)
	st.Removing = in.list(st.Removing)
	st.ISREpochs = in.epochMap(st.ISREpochs)
	return st
}

func (in *interner) list(l []int32) []int32 {
	if len(l) == 0 || len(l) > internMax {
		return slices.Clip(l)
	}
	k := in.key[:0]
	for _, r := range l {
		k = binary.LittleEndian.AppendUint32(k, uint32(r))
	}
	in.key = k
	if s, ok := in.lists[string(k)]; ok {
		return s
	}
	if len(in.lists) >= internEntries {
		clear(in.lists)
	}
	s := slices.Clip(slices.Clone(l))
	in.lists[string(k)] = s
	return s
}

func (in *interner) epochMap(m map[int32]int64) map[int32]int64 {
	if len(m) == 0 || len(m) > internMax {
		return m
	}
	var ids [internMax]int32
	n := 0
	for id := range m {
		ids[n] = id
		n++
	}
	sort.Slice(ids[:n], func(i, j int) bool { return ids[i] < ids[j] })
	k := in.key[:0]
	for _, id := range ids[:n] {
		k = binary.LittleEndian.AppendUint32(k, uint32(id))
		k = binary.LittleEndian.AppendUint64(k, uint64(m[id]))
	}
	in.key = k
	if s, ok := in.epochs[string(k)]; ok {
		return s
	}
	if len(in.epochs) >= internEntries {
		clear(in.epochs)
	}
	in.epochs[string(k)] = m
	return m
}

// sharedTopicID returns the topic id string the partitions ps of one
// topic already hold, or a copy of id (the id parsed from a partition key
// is a substring of that key: keeping it would keep every key).
func sharedTopicID(ps []Partition, id string) string {
	for i := range ps {
		if ps[i].ModRevision != 0 && ps[i].TopicID == id {
			return ps[i].TopicID
		}
	}
	return strings.Clone(id)
}
