package storage

import (
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

func TestLeaderEpochCache(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/d/ep-0"
	l := openTest(t, fsys, dir, testConfig(), false)
	app := func(epoch int32, n int) {
		res, err := l.Append(mkBatch(t, n, "e", 1), AppendOptions{LeaderEpoch: epoch})
		if err != nil {
			t.Fatal(err)
		}
		_ = res
	}
	app(0, 3) // 0..2
	app(0, 2) // 3..4
	app(2, 4) // 5..8
	app(5, 1) // 9
	l.Flush()
	check := func(l *Log, what string) {
		t.Helper()
		for _, c := range []struct {
			req    int32
			ep     int32
			endOff int64
		}{{0, 0, 5}, {1, 0, 5}, {2, 2, 9}, {3, 2, 9}, {5, 5, 10}, {6, -1, -1}, {-1, -1, -1}} {
			ep, end := l.EndOffsetForEpoch(c.req)
			if ep != c.ep || end != c.endOff {
				t.Fatalf("%s: EndOffsetForEpoch(%d) = %d,%d want %d,%d", what, c.req, ep, end, c.ep, c.endOff)
			}
		}
	}
	check(l, "live")
	img := fsys.Crash()
	l.Close()
	l = openTest(t, fsys, dir, testConfig(), true)
	check(l, "clean restart")
	l.Close()
	l = openTest(t, img, dir, testConfig(), false)
	check(l, "power cut")
	// Without the checkpoint, recovery rebuilds it from the batches.
	l.Close()
	img.Remove(dir + "/" + LeaderEpochFile)
	img.Remove("/d/" + RecoveryPointFile)
	l = openTest(t, img, dir, testConfig(), false)
	check(l, "rebuilt")
	// DeleteRecords moves the first epoch's start.
	l.DeleteRecords(4)
	if got := l.LeaderEpochs(); got[0] != (EpochEntry{0, 4}) {
		t.Fatalf("after DeleteRecords: %+v", got)
	}
	l.Close()
}

func FuzzParseEpochCheckpoint(f *testing.F) {
	f.Add(FormatEpochCheckpoint([]EpochEntry{{0, 0}, {3, 100}}))
	f.Add([]byte("0\n1\n5 x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ents, err := ParseEpochCheckpoint(data)
		if err != nil {
			return
		}
		again, err := ParseEpochCheckpoint(FormatEpochCheckpoint(ents))
		if err != nil || len(again) != len(ents) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
