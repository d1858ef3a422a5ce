//go:build invariants

package storage

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// TestInvariantsCatchBrokenIndex: with the invariants tag, an offset index
// entry that does not point at the batch it names, or a high watermark
// above the log end, makes the next check panic.
func TestInvariantsCatchBrokenIndex(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 0 // an index entry for every batch
	l := openTest(t, vfs.NewCrashFS(), "/d/inv-0", cfg, false)
	defer l.Close()
	for i := 0; i < 4; i++ {
		mustAppend(t, l, mkBatch(t, 2, "x", 10))
	}
	mustPanic := func(what, want string, breakIt func()) {
		t.Helper()
		l.mu.Lock()
		defer l.mu.Unlock()
		breakIt()
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(r.(string), want) {
				t.Fatalf("%s: recovered %v, want a panic mentioning %q", what, r, want)
			}
		}()
		l.checkInvariants(true)
	}
	oi := l.active.oi
	oi.mu.Lock()
	saved := append([]byte(nil), oi.buf...)
	oi.mu.Unlock()
	mustPanic("index entry off by one", "offset index entry", func() {
		oi.mu.Lock()
		binary.BigEndian.PutUint32(oi.buf[len(oi.buf)-4:], binary.BigEndian.Uint32(oi.buf[len(oi.buf)-4:])+1)
		oi.mu.Unlock()
	})
	oi.mu.Lock()
	oi.buf = saved
	oi.mu.Unlock()
	good := l.v.Load()
	mustPanic("high watermark above the end", "high watermark", func() {
		v := *good
		v.hw = v.leo + 1
		l.v.Store(&v)
	})
	l.v.Store(good)
}
