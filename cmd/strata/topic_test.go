package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestMain owns the temporary directory of the strata binary that the CLI
// tests share (built once, on first use, by buildStrata).
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedBin.dir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sharedBin is the binary built once per test process.
var sharedBin struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// buildStrata returns the strata binary: STRATA_E2E_BIN (scripts/test.sh
// builds it once for every package that runs the binary), or one built from
// this package on first use.
func buildStrata(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("STRATA_E2E_BIN"); bin != "" {
		return bin
	}
	sharedBin.once.Do(func() {
		sharedBin.path = filepath.Join(sharedBin.dir, "strata")
		sharedBin.out, sharedBin.err = exec.Command("go", "build", "-o", sharedBin.path, ".").CombinedOutput()
	})
	if sharedBin.err != nil {
		t.Fatalf("go build: %v\n%s", sharedBin.err, sharedBin.out)
	}
	return sharedBin.path
}

// result is one finished run of the binary.
type result struct {
	stdout, stderr string
	code           int
}

// run executes the binary with stdin and returns its output and exit code.
func run(t *testing.T, bin, stdin string, args ...string) result {
	t.Helper()
	// A generous safety deadline so a hung command fails its test instead
	// of the whole package timing out.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "STRATA_BROKERS=")
	cmd.Stdin = strings.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("strata %s: still running after 2 minutes\nstdout: %s\nstderr: %s", strings.Join(args, " "), so.String(), se.String())
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return result{so.String(), se.String(), code}
}

// ok runs the binary and fails the test unless it exits 0.
func ok(t *testing.T, bin, stdin string, args ...string) string {
	t.Helper()
	r := run(t, bin, stdin, args...)
	if r.code != 0 {
		t.Fatalf("strata %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails runs the binary and checks exit status 1 and the exact stderr.
func fails(t *testing.T, bin, wantStderr string, args ...string) {
	t.Helper()
	r := run(t, bin, "", args...)
	if r.code != 1 || r.stderr != wantStderr {
		t.Errorf("strata %s: exit %d, stderr %q; want exit 1, stderr %q", strings.Join(args, " "), r.code, r.stderr, wantStderr)
	}
}

// newCluster starts an in-memory kfake broker (a peer for tests only).
func newCluster(t *testing.T, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	return "127.0.0.1:1"
}

func TestTopicCLI(t *testing.T) {
	bin := buildStrata(t)
	addr := newCluster(t)
	b := "--brokers=" + addr

	out := ok(t, bin, "", "topic", "create", "user-profiles", "--partitions", "3", "--config", "cleanup.policy=compact", b)
	if out != "created topic \"user-profiles\" with 3 partitions\n" {
		t.Errorf("create: %q", out)
	}
	fails(t, bin, "strata: topic \"user-profiles\" already exists\n", "topic", "create", "user-profiles", b)

	out = ok(t, bin, "", "topic", "list", b)
	if !strings.Contains(out, "TOPIC") || !strings.Contains(out, "user-profiles  3") {
		t.Errorf("list: %q", out)
	}
	out = ok(t, bin, "", "topic", "list", "-o", "json", b)
	if !strings.Contains(out, `"topic": "user-profiles"`) || !strings.Contains(out, `"partitions": 3`) {
		t.Errorf("list json: %q", out)
	}

	ok(t, bin, "a:1\nb:2\na:3\n", "produce", "user-profiles", "-K:", "--partition", "1", b)
	out = ok(t, bin, "", "topic", "describe", "user-profiles", b)
	for _, want := range []string{"Topic: user-profiles", "cleanup.policy", "compact", "PARTITION", "START", "END"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
	// The topic id as Kafka prints it: URL-safe base64, no padding.
	if !regexp.MustCompile(`(?m)^Topic: user-profiles  ID: [A-Za-z0-9_-]{22}  Partitions: 3$`).MatchString(out) {
		t.Errorf("describe: topic id line:\n%s", out)
	}
	out = ok(t, bin, "", "topic", "describe", "user-profiles", "-o", "json", b)
	if !strings.Contains(out, `"end_offset": 3`) {
		t.Errorf("describe json lacks partition 1 end offset 3:\n%s", out)
	}

	if out := ok(t, bin, "", "topic", "alter", "user-profiles", "--set", "retention.ms=1000", b); out != "altered topic \"user-profiles\"\n" {
		t.Errorf("alter: %q", out)
	}
	out = ok(t, bin, "", "topic", "describe", "user-profiles", b)
	if !strings.Contains(out, "retention.ms") {
		t.Errorf("alter not visible:\n%s", out)
	}

	fails(t, bin, "strata: unknown topic \"nope\"\n", "topic", "describe", "nope", b)
	fails(t, bin, "strata: unknown topic \"nope\"\n", "topic", "delete", "nope", b)
	fails(t, bin, "strata: unknown flag: --bogus\n", "topic", "list", "--bogus", b)
	fails(t, bin, "strata: invalid --config \"x\": expected key=value\n", "topic", "create", "x", "--config", "x", b)
	fails(t, bin, "strata: invalid output format \"yaml\": use table or json\n", "topic", "list", "-o", "yaml", b)

	if out := ok(t, bin, "", "topic", "delete", "user-profiles", b); out != "deleted topic \"user-profiles\"\n" {
		t.Errorf("delete: %q", out)
	}

	r := run(t, bin, "", "topic", "list", "--brokers", deadAddr(t), "--timeout", "3s")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "strata: cannot reach broker at 127.0.0.1:1: ") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("broker down: exit %d stderr %q", r.code, r.stderr)
	}
}
