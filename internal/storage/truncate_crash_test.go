package storage

import (
	"fmt"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/vfs"
)

// TestTruncateToCrashAtEveryStep cuts the power before every file system
// operation of a TruncateTo that removes a later segment: the cut of the
// segment holding the truncation point is fsynced before the directory
// entries of the removed segment are, and the recovery point checkpoint
// named an offset inside the removed segment. Recovered, the log must be
// a prefix of the log before the truncation that holds the truncated one:
// never the truncated segment followed by the removed one, which left the
// offsets between them missing below the recovery point, where recovery
// does not look (found by a random-life soak of recovery on CrashFS). A follower
// that restarted so would not fetch those offsets again.
func TestTruncateToCrashAtEveryStep(t *testing.T) {
	cfg := resumeConfig()
	dir := "/d/trunc-0"
	fsys := vfs.NewCrashFS()
	s := NewSyncer(quiet)
	defer s.Close()
	l, err := Open(dir, [16]byte{1}, cfg, false, Options{FS: fsys, Syncer: s, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { l.Close() }()
	var all []record.Batch
	app := func(k int) {
		for range k {
			b := mkBatch(t, 1, fmt.Sprint("b", len(all)), int64(1000+10*len(all)))
			if _, err := l.Append(b, AppendOptions{LeaderEpoch: 1}); err != nil {
				t.Fatal(err)
			}
			all = append(all, b)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	app(37)
	if err := l.Roll(); err != nil { // the roll checkpoints recovery point 37
		t.Fatal(err)
	}
	app(6)
	if err := s.WriteCheckpoints(); err != nil {
		t.Fatal(err)
	}
	var images []resumeImage
	fsys.SetHook(func(op, name string) error {
		what := fmt.Sprintf("before %s %s", op, name)
		images = append(images, resumeImage{"power cut " + what, fsys.Crash(), 0},
			resumeImage{"power cut, entries first, " + what, fsys.CrashEntriesFirst(), 0})
		return nil
	})
	end, err := l.TruncateTo(21)
	fsys.SetHook(nil)
	if err != nil {
		t.Fatal(err)
	}
	if end != 21 || len(images) == 0 {
		t.Fatalf("truncated to %d with %d images", end, len(images))
	}
	for _, img := range images {
		r, err := Open(dir, [16]byte{1}, cfg, false, Options{FS: img.fsys, Logger: quiet})
		if err != nil {
			t.Fatalf("%s: recover: %v", img.what, err)
		}
		got := readAll(t, r, 0)
		leo := r.LogEndOffset()
		r.Close()
		if leo < 21 || leo > 43 {
			t.Fatalf("%s: log end %d, want 21 (truncated) to 43 (not yet)", img.what, leo)
		}
		if int64(len(got)) != leo {
			t.Fatalf("%s: %d batches read below log end %d: offsets missing", img.what, len(got), leo)
		}
		for i, b := range got {
			if b.BaseOffset() != int64(i) || string(b[record.HeaderSize-4:]) != string(all[i][record.HeaderSize-4:]) {
				t.Fatalf("%s: batch %d is at %d or differs", img.what, i, b.BaseOffset())
			}
		}
	}
}
