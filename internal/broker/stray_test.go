package broker

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStrayPartitionsRemovedAtOpen: partition directories no topic owns
// (a creation or deletion cut short by a crash) are deleted at start;
// the topics' own directories and other entries are kept.
func TestStrayPartitionsRemovedAtOpen(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "kept", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// What a crash in the middle of creating "half" leaves: directories
	// with partition files, but no metadata entry.
	for _, d := range []string{"half-0", "half-1", "half-2"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d, "00000000000000000000.log"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Not partition directories: left alone.
	for _, d := range []string{"backup", "kept-0.abc-delete", "x-01"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b = openTest(t, dir)
	defer b.Close()
	for _, d := range []string{"half-0", "half-1", "half-2"} {
		if _, err := os.Stat(filepath.Join(dir, d)); !os.IsNotExist(err) {
			t.Errorf("stray %s still there: %v", d, err)
		}
	}
	for _, d := range []string{"kept-0", "kept-1", "backup", "kept-0.abc-delete", "x-01"} {
		if _, err := os.Stat(filepath.Join(dir, d)); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
	if p, err := b.Partition("kept", 1); err != nil || p.Log == nil {
		t.Errorf("kept-1: %v", err)
	}
}
