package cleaner

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

func TestCheckpointRoundTrip(t *testing.T) {
	fsys := vfs.NewCrashFS()
	dir := "/logs"
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, CheckpointFile)
	got, err := readCheckpoint(fsys, path)
	if err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
	want := map[tp]int64{{"b", 1}: 7, {"a", 0}: 42, {"a", 10}: 0}
	if err := writeCheckpoint(fsys, path, want); err != nil {
		t.Fatal(err)
	}
	// Written durably: a power cut right after keeps it, in Kafka's text
	// format sorted by topic and partition.
	img := fsys.Crash()
	data, err := vfs.ReadFile(img, path)
	if err != nil || string(data) != "0\n3\na 0 42\na 10 0\nb 1 7\n" {
		t.Fatalf("file after power cut = %q, %v", data, err)
	}
	got, err = readCheckpoint(img, path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read %v %v", got, err)
	}
	if _, err := img.Stat(path + ".tmp"); err == nil {
		t.Fatal("tmp file left behind")
	}
}

func TestCheckpointMalformed(t *testing.T) {
	fsys := vfs.NewCrashFS()
	if err := fsys.MkdirAll("/logs", 0o755); err != nil {
		t.Fatal(err)
	}
	path := "/logs/" + CheckpointFile
	for _, s := range []string{"", "1\n0\n", "0\n", "0\n2\na 0 1\n", "0\n1\na x 1\n", "0\n1\na 0\n", "0\n-1\n"} {
		if err := vfs.WriteFileAtomic(fsys, path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readCheckpoint(fsys, path); !errors.Is(err, storage.ErrBadCheckpoint) {
			t.Errorf("%q: want ErrBadCheckpoint, got %v", s, err)
		}
	}
}

// TestCheckpointCrashAtEveryStep cuts the power before, and fails, each
// file-system operation of a checkpoint update (vfs.WriteFileAtomic: tmp
// file, write, fsync, rename, directory fsync): the file found after the
// cut, and the one left behind by the failed write, is the previous
// checkpoint or the new one, never a torn or missing one, and a later
// update succeeds. Cleaner progress is only ever lost back to the last
// completed update, which makes the next round re-clean clean data.
func TestCheckpointCrashAtEveryStep(t *testing.T) {
	const dir = "/logs"
	before := map[tp]int64{{"a", 0}: 10, {"b", 1}: 5}
	updates := []struct {
		name  string
		op    func(*checkpoints) error
		after map[tp]int64
	}{
		{"set", func(c *checkpoints) error { return c.set(dir, tp{"a", 0}, 20) }, map[tp]int64{{"a", 0}: 20, {"b", 1}: 5}},
		{"set new", func(c *checkpoints) error { return c.set(dir, tp{"c", 2}, 7) }, map[tp]int64{{"a", 0}: 10, {"b", 1}: 5, {"c", 2}: 7}},
		{"forget", func(c *checkpoints) error { return c.forget(tp{"b", 1}) }, map[tp]int64{{"a", 0}: 10}},
	}
	fixture := func(t *testing.T) (*vfs.CrashFS, *checkpoints) {
		t.Helper()
		fsys := vfs.NewCrashFS()
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeCheckpoint(fsys, filepath.Join(dir, CheckpointFile), before); err != nil {
			t.Fatal(err)
		}
		c, err := newCheckpoints(fsys, dir)
		if err != nil {
			t.Fatal(err)
		}
		return fsys, c
	}
	// oldOrNew reopens the checkpoints over fsys and checks they hold
	// before or after.
	oldOrNew := func(t *testing.T, fsys vfs.FS, when string, after map[tp]int64) {
		t.Helper()
		c, err := newCheckpoints(fsys, dir)
		if err != nil {
			t.Fatalf("%s: open: %v", when, err)
		}
		got := c.dirs[dir]
		if !reflect.DeepEqual(got, before) && !reflect.DeepEqual(got, after) {
			t.Fatalf("%s: checkpoint %v, want %v or %v", when, got, before, after)
		}
	}
	for _, u := range updates {
		t.Run(u.name, func(t *testing.T) {
			fsys, c := fixture(t)
			steps, err := fsys.Steps(func() error { return u.op(c) })
			if err != nil {
				t.Fatal(err)
			}
			if steps < 5 {
				t.Fatalf("an update made %d file-system operations, want at least 5", steps)
			}
			for k := 0; k <= steps; k++ {
				fsys, c := fixture(t)
				img, err := fsys.CrashAt(k, func() error { return u.op(c) })
				if k < steps && err == nil {
					t.Fatalf("step %d: the failed operation was not reported", k)
				}
				oldOrNew(t, img, fmt.Sprintf("power cut before step %d", k), u.after)
				oldOrNew(t, fsys, fmt.Sprintf("step %d failed", k), u.after)
				// The next update goes through and is durable.
				if err := c.set(dir, tp{"z", 9}, 1); err != nil {
					t.Fatalf("step %d: next update: %v", k, err)
				}
				got, err := readCheckpoint(fsys.Crash(), filepath.Join(dir, CheckpointFile))
				if err != nil || got[tp{"z", 9}] != 1 {
					t.Fatalf("step %d: after the next update: %v %v", k, got, err)
				}
			}
		})
	}
}
