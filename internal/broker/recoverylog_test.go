package broker

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecoveryLogLines checks the per-dir recovery lines and the
// clean_shutdown attribute of "logs loaded" after a clean close and after
// a shutdown that left no marker.
func TestRecoveryLogLines(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	open := func() (*Broker, string) {
		t.Helper()
		var buf bytes.Buffer
		b, err := Open(testConfig(t, dirA+","+dirB), slog.New(slog.NewTextHandler(&buf, nil)))
		if err != nil {
			t.Fatal(err)
		}
		return b, buf.String()
	}
	b, log := open()
	for _, want := range []string{
		`msg="log dir has no partitions: nothing to recover" dir=` + dirA,
		`msg="log dir has no partitions: nothing to recover" dir=` + dirB,
		`clean_shutdown=true`,
	} {
		if !strings.Contains(log, want) || strings.Contains(log, "no clean shutdown marker") {
			t.Errorf("fresh start: log lacks %q or mentions a marker:\n%s", want, log)
		}
	}
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "t", NumPartitions: 3, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b, log = open()
	for _, want := range []string{
		`msg="skipping recovery: clean shutdown marker found" dir=` + dirA + ` partitions=2`,
		`msg="skipping recovery: clean shutdown marker found" dir=` + dirB + ` partitions=1`,
		`clean_shutdown=true`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("clean start: log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "recovering partitions") {
		t.Errorf("clean start logged recovery:\n%s", log)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// Only dirB loses its marker: dirA skips recovery, dirB recovers.
	if err := os.Remove(filepath.Join(dirB, cleanShutdownName)); err != nil {
		t.Fatal(err)
	}
	b, log = open()
	defer b.Close()
	for _, want := range []string{
		`msg="skipping recovery: clean shutdown marker found" dir=` + dirA + ` partitions=2`,
		`msg="recovering partitions: no clean shutdown marker" dir=` + dirB + ` partitions=1`,
		`clean_shutdown=false`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("unclean start: log lacks %q:\n%s", want, log)
		}
	}
}
