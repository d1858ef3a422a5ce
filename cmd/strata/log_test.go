package main

import (
	"golang.org/x/sys/unix"

	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/record"
)

// logTestBinary is the strata binary the other CLI tests run (buildStrata).
func logTestBinary(t *testing.T) string {
	t.Helper()
	return buildStrata(t)
}

// logTestRun runs bin and returns stdout, stderr and the exit status.
func logTestRun(t *testing.T, bin string, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), stderr.String(), 0
	case errors.As(err, &ee):
		return stdout.String(), stderr.String(), ee.ExitCode()
	}
	t.Fatalf("run %v: %v", args, err)
	return "", "", -1
}

// logTestDir writes a log dir with partition t-0: one segment of two
// batches (the second gzip) and no index files. It returns the dir and the
// .log path.
func logTestDir(t *testing.T) (string, string) {
	t.Helper()
	root := t.TempDir()
	part := filepath.Join(root, "t-0")
	if err := os.Mkdir(part, 0o755); err != nil {
		t.Fatal(err)
	}
	var seg []byte
	for i, c := range []record.Compression{record.None, record.Gzip} {
		recs := []record.Record{{Key: nil, Value: []byte("v")}, {OffsetDelta: 1, Key: []byte{}, Value: nil}}
		b, err := record.Build(record.BatchHeader{BaseOffset: int64(2 * i), Attributes: int16(c), LastOffsetDelta: 1,
			BaseTimestamp: 1000, MaxTimestamp: 1000, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, recs)
		if err != nil {
			t.Fatal(err)
		}
		seg = append(seg, b...)
	}
	logPath := filepath.Join(part, "00000000000000000000.log")
	if err := os.WriteFile(logPath, seg, 0o644); err != nil {
		t.Fatal(err)
	}
	return root, logPath
}

func TestLogCLI(t *testing.T) {
	bin := logTestBinary(t)
	root, logPath := logTestDir(t)

	out, _, code := logTestRun(t, bin, "log", "verify", root)
	if code != 0 || !strings.Contains(out, "checked 1 partitions, 1 segments, 2 batches, 4 records") || !strings.Contains(out, ": OK") {
		t.Fatalf("verify sound dir: status %d\n%s", code, out)
	}

	// A directory whose .lock a broker holds gets a warning, and the
	// verdict still.
	lock, err := os.Create(filepath.Join(root, ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := logTestRun(t, bin, "log", "verify", root)
	if code != 0 || !strings.Contains(out, ": OK") || !strings.HasPrefix(stderr, "warning: a broker is running on "+root+" (it holds the directory's .lock)") {
		t.Errorf("verify of a live dir: status %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	lock.Close()
	if _, stderr, _ := logTestRun(t, bin, "log", "verify", root); stderr != "" {
		t.Errorf("verify once the lock is released: %q", stderr)
	}

	out, _, code = logTestRun(t, bin, "log", "dump", "--print-records", logPath)
	if code != 0 || !strings.Contains(out, "compression: gzip") || !strings.Contains(out, `| offset: 3 timestamp: 1000 key: "" value: null`) {
		t.Fatalf("dump: status %d\n%s", code, out)
	}

	out, _, code = logTestRun(t, bin, "log", "dump", "-o", "json", "--print-records", filepath.Dir(logPath))
	if code != 0 {
		t.Fatalf("dump json: status %d", code)
	}
	lines := 0
	for sc := bufio.NewScanner(strings.NewReader(out)); sc.Scan(); lines++ {
		if !json.Valid(sc.Bytes()) {
			t.Fatalf("not JSON: %q", sc.Text())
		}
	}
	if lines != 1+2+4 {
		t.Fatalf("dump json: %d lines\n%s", lines, out)
	}

	for _, args := range [][]string{
		{"log", "verify"},
		{"log", "verify", root, root},
		{"log", "verify", "--no-such-flag", root},
		{"log", "verify", "-o", "yaml", root},
		{"log", "verify", logPath},
		{"log", "dump"},
	} {
		if _, stderr, code := logTestRun(t, bin, args...); code != 2 || !strings.Contains(stderr, "Usage:") {
			t.Errorf("%v: status %d (want 2)\n%s", args, code, stderr)
		}
	}

	data, _ := os.ReadFile(logPath)
	data[70] ^= 0xff
	os.WriteFile(logPath, append(data, data[:30]...), 0o644)
	out, stderr, code = logTestRun(t, bin, "log", "verify", root)
	if code != 1 || !strings.Contains(out, logPath+": position 0: invalid batch at offset 0") || !strings.Contains(out, "CRC mismatch") ||
		!strings.Contains(out, "torn tail at position") || !strings.Contains(out, "2 PROBLEMS") || !strings.Contains(stderr, "2 problems found") {
		t.Fatalf("verify damaged dir: status %d\n%s\n%s", code, out, stderr)
	}
	if _, _, code := logTestRun(t, bin, "log", "dump", logPath); code != 1 {
		t.Fatalf("dump of damaged segment: status %d, want 1", code)
	}
}
