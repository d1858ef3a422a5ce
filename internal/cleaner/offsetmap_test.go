package cleaner

import (
	"encoding/binary"
	"fmt"
	"testing"
)

func TestOffsetMapPutGet(t *testing.T) {
	m, err := NewOffsetMap(24*100, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	if m.Capacity() != 90 || m.Slots() != 100 {
		t.Fatalf("capacity %d slots %d", m.Capacity(), m.Slots())
	}
	if got := m.Get([]byte("a")); got != -1 {
		t.Fatalf("empty get = %d", got)
	}
	m.Put([]byte("a"), 5)
	m.Put([]byte("a"), 3) // older never overwrites
	m.Put([]byte(""), 7)  // empty key is a real key
	if m.Get([]byte("a")) != 5 || m.Get([]byte("")) != 7 || m.Size() != 2 {
		t.Fatalf("a=%d empty=%d size=%d", m.Get([]byte("a")), m.Get([]byte("")), m.Size())
	}
	for i := 0; m.Put([]byte(fmt.Sprint("k", i)), int64(i)); i++ {
	}
	if !m.Full() || m.Size() != 90 {
		t.Fatalf("full=%v size=%d", m.Full(), m.Size())
	}
	// Existing keys still update when full.
	if !m.Put([]byte("a"), 100) || m.Get([]byte("a")) != 100 {
		t.Fatal("update when full failed")
	}
	for i := 0; i < 88; i++ {
		if got := m.Get([]byte(fmt.Sprint("k", i))); got != int64(i) {
			t.Fatalf("k%d = %d", i, got)
		}
	}
	m.Clear()
	if m.Size() != 0 || m.Get([]byte("a")) != -1 || m.Latest() != -1 {
		t.Fatal("clear failed")
	}
}

func TestOffsetMapTooSmall(t *testing.T) {
	if _, err := NewOffsetMap(10, 0.9); err == nil {
		t.Fatal("want error for a map with no slot")
	}
	m, err := NewOffsetMap(24, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	if m.Capacity() != 1 || !m.Put([]byte("x"), 1) || m.Put([]byte("y"), 2) {
		t.Fatalf("tiny map: cap %d", m.Capacity())
	}
}

func BenchmarkOffsetMapPut(b *testing.B) {
	m, _ := NewOffsetMap(128<<20, DefaultLoadFactor)
	defer m.Free()
	key := make([]byte, 16)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if m.Full() {
			m.Clear()
		}
		binary.BigEndian.PutUint64(key, uint64(i))
		m.Put(key, int64(i))
	}
}

func BenchmarkOffsetMapGet(b *testing.B) {
	m, _ := NewOffsetMap(128<<20, DefaultLoadFactor)
	defer m.Free()
	key := make([]byte, 16)
	n := m.Capacity()
	for i := 0; i < n; i++ {
		binary.BigEndian.PutUint64(key, uint64(i))
		m.Put(key, int64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		binary.BigEndian.PutUint64(key, uint64(i%n))
		m.Get(key)
	}
}
