// Package faults runs the Jepsen-style workload (internal/workload) against
// brokers under faults (internal/faults) and checks the histories
// (internal/checker). Bounded runs fit in CI; STRATA_LONG=1 runs the long
// versions. Each run saves report.txt, anomalies.json and history.jsonl under
// $STRATA_FAULTS_OUT/<test> (or a temporary directory, logged).
package faults

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/checker"
	"github.com/strata-io/strata/internal/faults"
	"github.com/strata-io/strata/internal/freeport"
	"github.com/strata-io/strata/internal/workload"
)

// strataBin is the binary built by TestMain (or STRATA_E2E_BIN).
var strataBin string

// hasReserve reports whether strataBin knows strata.log.min.free.bytes
// (the free-space reserve, landing from the cluster work in session 5):
// the small-disk clusters set it and the disk-full-combined row needs it.
// Remove once every binary has it.
var hasReserve bool

func knowsSetting(bin, name string) bool {
	out, err := exec.Command(bin, "serve", "--help-all").CombinedOutput()
	return err == nil && strings.Contains(string(out), name)
}

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	if bin := os.Getenv("STRATA_E2E_BIN"); bin != "" {
		strataBin = bin
		hasReserve = knowsSetting(strataBin, "strata.log.min.free.bytes")
		return m.Run()
	}
	tmp, err := os.MkdirTemp("", "strata-faults-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	_, here, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(here), "..", "..")
	strataBin = filepath.Join(tmp, "strata")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := faults.BuildStrata(ctx, root, strataBin); err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		return 1
	}
	hasReserve = knowsSetting(strataBin, "strata.log.min.free.bytes")
	return m.Run()
}

// long reports whether STRATA_LONG=1 asks for the long runs.
func long() bool { return os.Getenv("STRATA_LONG") == "1" }

// artifacts is where a test saves its run.
func artifacts(t *testing.T) string {
	if base := os.Getenv("STRATA_FAULTS_OUT"); base != "" {
		dir := filepath.Join(base, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.TempDir()
}

// freeAddr returns a loopback address whose port is reserved for this test
// (internal/freeport: below the ephemeral range and locked across test
// processes, so nothing else takes it between now and the broker's bind,
// nor between a SIGKILL and the restart on the same port).
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeport.Addr(t)
}

// finish stops the workload, drains it, checks it, saves the artifacts and
// logs the report's summary.
func finish(t *testing.T, ctx context.Context, r *workload.Runner, notes map[string]string) *checker.Result {
	t.Helper()
	r.Stop()
	if err := r.Drain(ctx); err != nil {
		// Keep the history of a run whose drain failed.
		dir := artifacts(t)
		f, ferr := os.Create(filepath.Join(dir, "history.jsonl"))
		if ferr == nil {
			ferr = r.History().WriteJSONL(f)
			if cerr := f.Close(); ferr == nil {
				ferr = cerr
			}
		}
		t.Fatalf("drain: %v (history in %s: %v)", err, dir, ferr)
	}
	res := r.Check()
	for k, v := range notes {
		res.Note(k, v)
	}
	dir := artifacts(t)
	if err := workload.WriteArtifacts(dir, r.History(), res); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; report in %s", res.Summary(), filepath.Join(dir, "report.txt"))
	return res
}

func reportText(t *testing.T, res *checker.Result) string {
	var b strings.Builder
	if err := res.WriteReport(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// envInt is the integer in environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envString is environment variable name, or def when unset.
func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// copyFile copies src to dst (a failed run's broker logs into its
// artifacts, which outlive the test's temporary directory when
// STRATA_FAULTS_OUT is set).
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
