package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/servertest"
)

// TestRunAndCheck runs the workload for a few seconds against a real
// in-process broker, expects a clean report and the artifacts, then
// re-checks the saved history.
func TestRunAndCheck(t *testing.T) {
	b := servertest.Start(t, servertest.Options{})
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, []string{"run", "--brokers", b.Addr(), "--duration", "3s", "--out", dir, "--group-consumers", "0"}, &out, &errs)
	if code != 0 {
		t.Fatalf("run exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "VALID: no anomaly found") || !strings.Contains(out.String(), "drained after healing: true") {
		t.Fatalf("report:\n%s", out.String())
	}
	out.Reset()
	if code := run(ctx, []string{"check", filepath.Join(dir, "history.jsonl")}, &out, &errs); code != 0 {
		t.Fatalf("check exited %d:\n%s\n%s", code, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "VALID") {
		t.Fatalf("re-check report:\n%s", out.String())
	}
}

// TestUsage: a missing or wrong argument is exit status 2 with a message.
func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"run"}, {"check"}, {"check", "/nonexistent/history.jsonl"}} {
		var out, errs bytes.Buffer
		if code := run(context.Background(), args, &out, &errs); code != 2 || errs.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs.String())
		}
	}
}
