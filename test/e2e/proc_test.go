package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds how long a broker may take to print its listening
// line (BenchmarkManyPartitions raises it: recovering ten thousand
// partitions may take longer).
var startTimeout = 60 * time.Second

// listeningMsg is the message of the broker's "ready" log line.
const listeningMsg = "strata broker listening"

// proc is one running `strata serve` child process.
type proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	name string

	mu    sync.Mutex
	lines []string // stderr+stdout lines, in arrival order

	done    chan struct{} // closed when the process has exited
	waitErr error

	// From the listening line.
	Kafka      string // host:port of the Kafka listener ("" on a controller-only node)
	Controller string // host:port of the controller listener ("" on a broker-only node)
	Metrics    string // base URL of the HTTP listener ("" if disabled)
	LogDirs    string // log.dirs as logged
	Line       string // the listening line itself
}

// brokerEnv is the environment for a child broker: ours minus every
// STRATA_ variable, so no setting leaks in from the developer's shell.
func brokerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			env = append(env, kv)
		}
	}
	return env
}

// startProc runs `strata <args...>` with cwd dir and waits for the
// listening line. The process is SIGKILLed in t.Cleanup if still running.
func startProc(t testing.TB, dir string, args ...string) *proc {
	t.Helper()
	p, err := tryStartProc(t, dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryStartProc is startProc returning an error instead of failing when the
// broker exits or stays silent.
func tryStartProc(t testing.TB, dir string, args ...string) (*proc, error) {
	t.Helper()
	p := &proc{t: t, name: strings.Join(args, " "), done: make(chan struct{})}
	p.cmd = exec.Command(strataBin, args...)
	p.cmd.Dir = dir
	p.cmd.Env = brokerEnv()
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start strata %s: %v", p.name, err)
	}
	ready := make(chan string, 1)
	go func() { // owner: p; ends when the process exits and the pipe closes
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.lines = append(p.lines, line)
			p.mu.Unlock()
			if !sent && strings.Contains(line, listeningMsg) {
				ready <- line
				sent = true
			}
		}
	}()
	go func() { // owner: p; ends when the process exits
		err := p.cmd.Wait()
		pw.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("log of strata %s (pid %d):\n%s", p.name, p.cmd.Process.Pid, p.Log())
		}
	})
	select {
	case line := <-ready:
		p.Line = line
		p.parseListening(line)
	case <-p.done:
		return p, fmt.Errorf("strata %s exited before listening (%v):\n%s", p.name, p.exitErr(), p.Log())
	case <-time.After(startTimeout):
		return p, fmt.Errorf("strata %s did not print %q within %s:\n%s", p.name, listeningMsg, startTimeout, p.Log())
	}
	return p, nil
}

// startBroker runs `strata serve` on random ports with JSON logs and the
// given log dir plus extra flags.
func startBroker(t testing.TB, logDir string, extra ...string) *proc {
	t.Helper()
	p, err := tryStartBroker(t, logDir, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryStartBroker is startBroker returning an error instead of failing.
func tryStartBroker(t testing.TB, logDir string, extra ...string) (*proc, error) {
	t.Helper()
	args := []string{"serve",
		"--listeners", "PLAINTEXT://127.0.0.1:0",
		"--strata.metrics.listener", "127.0.0.1:0",
		"--log.dirs", logDir,
		"--strata.log.format", "json",
	}
	return tryStartProc(t, logDir, append(args, extra...)...)
}

var textAttr = regexp.MustCompile(`(\S+?)=("(?:[^"\\]|\\.)*"|\S*)`)

// parseLine returns the attributes of a slog JSON or text line.
func parseLine(line string) map[string]string {
	out := map[string]string{}
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) == nil {
		for k, v := range m {
			out[k] = fmt.Sprint(v)
		}
		return out
	}
	for _, kv := range textAttr.FindAllStringSubmatch(line, -1) {
		v := kv[2]
		if strings.HasPrefix(v, `"`) {
			var s string
			if json.Unmarshal([]byte(v), &s) == nil {
				v = s
			}
		}
		out[kv[1]] = v
	}
	return out
}

func (p *proc) parseListening(line string) {
	a := parseLine(line)
	p.Kafka = a["kafka"]
	p.Controller = a["controller"]
	p.LogDirs = a["log.dirs"]
	if m := a["metrics"]; m != "" {
		p.Metrics = strings.TrimSuffix(m, "/metrics")
	}
	if p.Kafka == "" && p.Controller == "" {
		p.t.Fatalf("listening line has neither a kafka nor a controller address: %s", line)
	}
}

// Log returns everything the process printed so far.
func (p *proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// Lines returns a copy of the printed lines.
func (p *proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Kill SIGKILLs the broker and waits for it to be gone.
func (p *proc) Kill() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Fatalf("strata %s still running 30s after SIGKILL", p.name)
	}
}

// Term sends SIGTERM and waits (bounded) for the exit; it returns the exit
// code (-1 when killed by a signal).
func (p *proc) Term() int {
	p.t.Helper()
	p.SignalTerm()
	return p.WaitExit()
}

// SignalTerm sends SIGTERM without waiting (WaitExit waits): several
// processes stopped at once.
func (p *proc) SignalTerm() {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatalf("SIGTERM: %v", err)
	}
}

// WaitExit waits (60 s at most) for the process to exit after SignalTerm
// and returns its exit code.
func (p *proc) WaitExit() int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("strata %s did not exit within 60s of SIGTERM:\n%s", p.name, p.Log())
	}
	var ee *exec.ExitError
	if err := p.exitErr(); errors.As(err, &ee) {
		return ee.ExitCode()
	} else if err != nil {
		p.t.Fatalf("wait: %v", err)
	}
	return 0
}

// Alive reports whether the process is still running.
func (p *proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// httpGet fetches url and returns status and body.
func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// ctxFor returns a context bounded by d, cancelled in t.Cleanup.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// needKcat returns kcat's path; a missing kcat fails the test.
func needKcat(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err == nil {
		return path
	}
	msg := "kcat not found in PATH: install the Debian package kcat (apt-get install -y kcat) or run scripts/test.sh"
	t.Fatal(msg)
	return ""
}

// runKcat runs kcat with stdin and returns stdout; it fails the test on a
// non-zero exit.
func runKcat(t *testing.T, ctx context.Context, kcat, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, kcat, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// logsLoaded returns the elapsed time of the broker's "logs loaded" line
// (how long opening, and recovering, every partition took), or "?".
func (p *proc) logsLoaded() string {
	for _, l := range p.Lines() {
		if a := parseLine(l); a["msg"] == "logs loaded" {
			if e, ok := a["elapsed"]; ok {
				if ns, err := strconv.ParseFloat(e, 64); err == nil {
					return time.Duration(ns).String() // JSON handler writes durations as nanoseconds
				}
				return e
			}
		}
	}
	return "?"
}
