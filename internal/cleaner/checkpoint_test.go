package cleaner

import (
	"errors"
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
