package broker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShutdownDeadline: a shutdown whose deadline has passed writes no
// clean-shutdown marker and says so, and the next start recovers with
// every acknowledged record; a shutdown within its deadline writes the
// marker.
func TestShutdownDeadline(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "t", NumPartitions: 4, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range int32(4) {
		p, _ := b.Partition("t", i)
		if _, err := p.Append(ctx, testBatch(t, 3), -1); err != nil {
			t.Fatal(err)
		}
	}
	late, cancel := context.WithCancel(ctx)
	cancel()
	err := b.Shutdown(late)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "no clean-shutdown marker") {
		t.Fatalf("shutdown past its deadline: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownName)); err == nil {
		t.Fatal("clean-shutdown marker written past the deadline")
	}
	var buf bytes.Buffer
	progress := &LoadProgress{}
	b, err = OpenWithProgress(testConfig(t, dir), slog.New(slog.NewTextHandler(&buf, nil)), nil, progress)
	if err != nil {
		t.Fatal(err)
	}
	if got := progress.String(); got != "recovering logs: 4 of 4 partitions loaded" {
		t.Errorf("progress after the recovery: %q", got)
	}
	if !strings.Contains(buf.String(), "recovering partitions: no clean shutdown marker") {
		t.Errorf("start after a late shutdown did not recover:\n%s", buf.String())
	}
	for i := range int32(4) {
		p, _ := b.Partition("t", i)
		if got := p.Log.HighWatermark(); got != 3 {
			t.Errorf("partition %d after recovery: high watermark %d, want 3", i, got)
		}
	}
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownName)); err != nil {
		t.Fatalf("no clean-shutdown marker after a timely shutdown: %v", err)
	}
}
