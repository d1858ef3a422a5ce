package cleaner

import (
	"fmt"
	"hash/maphash"
	"math/bits"
)

// EntrySize is the number of bytes one offset-map slot takes: a 128-bit key
// hash and an int64 offset, like Kafka's SkimpyOffsetMap (MD5 + offset).
const EntrySize = 24

// DefaultLoadFactor is log.cleaner.io.buffer.load.factor: the map is
// considered full at this fraction of its slots.
const DefaultLoadFactor = 0.9

// OffsetMap is a fixed-size open-addressing hash table from a key's 128-bit
// hash to the latest offset seen for it. It never allocates after creation.
// The two 64-bit halves of the hash come from maphash with two independent
// random seeds, so two distinct keys collide with probability ~2^-128 and
// an attacker who does not know the seeds cannot force a collision (a
// collision would make the cleaner treat the older key as superseded).
// An empty slot has both hash words zero. Not safe for concurrent use.
type OffsetMap struct {
	slots   []uint64 // 3 words per slot: h1, h2, offset
	mem     *tableMem
	n       uint64 // number of slots in use (Limit)
	maxKeys int    // capacity at the load factor
	fullN   uint64 // slots of the table
	fullMax int    // capacity of the whole table
	load    float64
	size    int
	seed1   maphash.Seed
	seed2   maphash.Seed
	latest  int64  // highest offset covered (see SetLatest); -1 when none
	sink    uint64 // keeps touch loads alive
}

// NewOffsetMap returns a map using about memBytes bytes.
func NewOffsetMap(memBytes int64, loadFactor float64) (*OffsetMap, error) {
	if loadFactor <= 0 || loadFactor > 1 {
		return nil, fmt.Errorf("offset map: load factor %v not in (0,1]", loadFactor)
	}
	n := memBytes / EntrySize
	maxKeys := int(float64(n) * loadFactor)
	if n < 1 || maxKeys < 1 {
		return nil, fmt.Errorf("offset map: %d bytes hold no key at load factor %v: increase log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads", memBytes, loadFactor)
	}
	if maxKeys >= int(n) { // keep at least one empty slot so probes end
		maxKeys = int(n) - 1
		if maxKeys < 1 {
			n = 2
			maxKeys = 1
		}
	}
	mem, slots, err := allocTable(int(3 * n))
	if err != nil {
		return nil, err
	}
	return &OffsetMap{
		slots:   slots,
		mem:     mem,
		n:       uint64(n),
		maxKeys: maxKeys,
		fullN:   uint64(n),
		fullMax: maxKeys,
		load:    loadFactor,
		seed1:   maphash.MakeSeed(),
		seed2:   maphash.MakeSeed(),
		latest:  -1,
	}, nil
}

// keyHash is a key's 128-bit hash under the map's seeds, never (0, 0).
type keyHash struct{ h1, h2 uint64 }

func (m *OffsetMap) hashKey(key []byte) keyHash {
	h := keyHash{maphash.Bytes(m.seed1, key), maphash.Bytes(m.seed2, key)}
	if h.h1 == 0 && h.h2 == 0 {
		h.h2 = 1
	}
	return h
}

// slotOf maps h1 to a slot index without division bias (fastrange).
func (m *OffsetMap) slotOf(h1 uint64) uint64 {
	hi, _ := bits.Mul64(h1, m.n)
	return hi
}

// touch loads the home slot of every hash in hs. The loads do not depend
// on each other, so the CPU overlaps their cache and TLB misses; the
// probes that follow then mostly hit the cache. The result only keeps the
// loads from being optimised away.
func (m *OffsetMap) touch(hs []keyHash) uint64 {
	var x uint64
	for i := range hs {
		if hs[i].h1 != 0 || hs[i].h2 != 0 {
			x ^= m.slots[3*m.slotOf(hs[i].h1)]
		}
	}
	return x
}

// Put records offset as the latest offset of key, overwriting an older
// one. It reports false (and changes nothing) when key is new and the map
// is full.
func (m *OffsetMap) Put(key []byte, offset int64) bool { return m.putHash(m.hashKey(key), offset) }

func (m *OffsetMap) putHash(h keyHash, offset int64) bool {
	i := m.slotOf(h.h1)
	for {
		s := m.slots[3*i : 3*i+3 : 3*i+3]
		if s[0] == 0 && s[1] == 0 {
			if m.size >= m.maxKeys {
				return false
			}
			s[0], s[1], s[2] = h.h1, h.h2, uint64(offset)
			m.size++
			return true
		}
		if s[0] == h.h1 && s[1] == h.h2 {
			if offset > int64(s[2]) {
				s[2] = uint64(offset)
			}
			return true
		}
		i++
		if i == m.n {
			i = 0
		}
	}
}

// Get returns the latest offset recorded for key, or -1.
func (m *OffsetMap) Get(key []byte) int64 { return m.getHash(m.hashKey(key)) }

func (m *OffsetMap) getHash(h keyHash) int64 {
	i := m.slotOf(h.h1)
	for {
		s := m.slots[3*i : 3*i+3 : 3*i+3]
		if s[0] == 0 && s[1] == 0 {
			return -1
		}
		if s[0] == h.h1 && s[1] == h.h2 {
			return int64(s[2])
		}
		i++
		if i == m.n {
			i = 0
		}
	}
}

// Full reports whether no new key can be added.
func (m *OffsetMap) Full() bool { return m.size >= m.maxKeys }

// Size is the number of keys held.
func (m *OffsetMap) Size() int { return m.size }

// Capacity is the number of keys the map holds at its load factor.
func (m *OffsetMap) Capacity() int { return m.maxKeys }

// Slots is the number of slots.
func (m *OffsetMap) Slots() int { return int(m.n) }

// Utilization is Size over the slots of the whole table (Kafka's
// max-buffer-utilization-percent / 100), whatever Limit chose.
func (m *OffsetMap) Utilization() float64 { return float64(m.size) / float64(m.fullN) }

// SetLatest records the highest offset the map covers: every keyed record
// with an offset <= latest in the mapped range has been put.
func (m *OffsetMap) SetLatest(o int64) { m.latest = o }

// Latest is the highest offset the map covers, -1 when none.
func (m *OffsetMap) Latest() int64 { return m.latest }

// Limit makes an empty map use only the first slots of its table, enough
// for keys keys at the load factor (never more than the table): a round
// whose dirty range holds at most keys records then touches a few pages
// instead of faulting in pages all over the dedupe buffer (128 MiB by
// default), which on a small log (a few hundred records, tiny segments)
// was most of the map build's time. Clear undoes it.
func (m *OffsetMap) Limit(keys int64) {
	if m.size != 0 || keys < 0 {
		return
	}
	n := uint64(float64(keys)/m.load) + 2
	if n >= m.fullN {
		return
	}
	m.n = n
	m.maxKeys = min(m.fullMax, int(n)-1)
}

// Clear empties the map (and draws fresh hash seeds).
func (m *OffsetMap) Clear() {
	if m.size > 0 {
		m.mem.reset(m.slots)
	}
	m.n, m.maxKeys = m.fullN, m.fullMax
	m.size = 0
	m.latest = -1
	m.seed1 = maphash.MakeSeed()
	m.seed2 = maphash.MakeSeed()
}

// MemBytes is the size of the table in bytes.
func (m *OffsetMap) MemBytes() int64 { return int64(len(m.slots)) * 8 }

// Free releases the table's memory; the map must not be used afterwards.
func (m *OffsetMap) Free() {
	m.mem.free()
	m.slots = nil
	m.size = 0
}
