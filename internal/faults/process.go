// Package faults injects faults into real broker processes on one machine:
// SIGKILL and restart, SIGSTOP/SIGCONT, a full disk (a tmpfs per broker
// directory, filled with ballast), and network partitions between brokers
// that each run in their own Linux network namespace, joined by veth pairs
// to a bridge, with traffic cut by iptables (symmetric or one-way). It needs
// root, `ip` and `iptables` (scripts/test.sh installs iptables).
//
// Everything here is a plain process harness: it runs any command line
// (Proc), so the cluster tests start `strata serve --node.id ...` nodes with
// the flags the cluster owns, inside Net namespaces when they need
// partitions. Nemesis runs a schedule of Faults and records each injection
// and heal in the workload's checker history.
package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcSpec says how to run one process.
type ProcSpec struct {
	Name  string   // for logs and reports ("broker-1")
	Path  string   // binary
	Args  []string // arguments
	Dir   string   // working directory ("" = current)
	Env   []string // environment (nil = this process's, minus STRATA_*)
	Netns string   // run inside this network namespace (via `ip netns exec`)
	// Ready, if set, is a substring of an output line that says the process
	// is serving; Start waits for it.
	Ready string
	// LogPath, if set, receives everything the process prints (appended
	// across restarts).
	LogPath string
}

// Proc is one process that can be killed, paused and restarted with the
// same command line. Methods are safe for concurrent use.
type Proc struct {
	spec ProcSpec

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	lines   []string // output of the current incarnation
	ready   string   // the Ready line of the current incarnation
	starts  int
	paused  bool
	logFile *os.File
}

// NewProc prepares a process; Start runs it.
func NewProc(spec ProcSpec) *Proc { return &Proc{spec: spec} }

// Name is the spec's name.
func (p *Proc) Name() string { return p.spec.Name }

// cleanEnv is this process's environment minus STRATA_* variables, so no
// setting leaks into a child broker from the developer's shell.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			env = append(env, kv)
		}
	}
	return env
}

// Start runs the process and, when Ready is set, waits until it prints the
// ready line, exits, or ctx ends.
func (p *Proc) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.cmd != nil && !p.exitedLocked() {
		p.mu.Unlock()
		return fmt.Errorf("%s: already running", p.spec.Name)
	}
	args := append([]string(nil), p.spec.Args...)
	path := p.spec.Path
	if p.spec.Netns != "" {
		args = append([]string{"netns", "exec", p.spec.Netns, path}, args...)
		path = "ip"
	}
	if p.spec.Dir != "" {
		if err := os.MkdirAll(p.spec.Dir, 0o755); err != nil {
			p.mu.Unlock()
			return fmt.Errorf("%s: %w", p.spec.Name, err)
		}
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = p.spec.Dir
	cmd.Env = p.spec.Env
	if cmd.Env == nil {
		cmd.Env = cleanEnv()
	}
	if p.spec.LogPath != "" && p.logFile == nil {
		if err := os.MkdirAll(filepath.Dir(p.spec.LogPath), 0o755); err != nil {
			p.mu.Unlock()
			return err
		}
		f, err := os.OpenFile(p.spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			p.mu.Unlock()
			return err
		}
		p.logFile = f
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s: start: %w", p.spec.Name, err)
	}
	p.cmd, p.done, p.waitErr, p.lines, p.ready, p.paused = cmd, make(chan struct{}), nil, nil, "", false
	p.starts++
	done := p.done
	readyCh := make(chan string, 1)
	incarnation := p.starts
	if p.logFile != nil {
		fmt.Fprintf(p.logFile, "=== %s start %d: %s %s\n", p.spec.Name, incarnation, path, strings.Join(args, " "))
	}
	p.mu.Unlock()

	go func() { // owner: p; ends when the process exits and its pipe closes
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if p.starts == incarnation {
				p.lines = append(p.lines, line)
			}
			if p.logFile != nil {
				fmt.Fprintln(p.logFile, line)
			}
			p.mu.Unlock()
			if !sent && p.spec.Ready != "" && strings.Contains(line, p.spec.Ready) {
				readyCh <- line
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { // owner: p; ends when the process exits
		err := cmd.Wait()
		pw.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(done)
	}()
	if p.spec.Ready == "" {
		return nil
	}
	select {
	case line := <-readyCh:
		p.mu.Lock()
		p.ready = line
		p.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("%s exited before it was ready (%v):\n%s", p.spec.Name, p.ExitErr(), p.Output())
	case <-ctx.Done():
		return fmt.Errorf("%s not ready (%w):\n%s", p.spec.Name, ctx.Err(), p.Output())
	}
}

func (p *Proc) exitedLocked() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Running reports whether the current incarnation is alive (paused counts).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd != nil && !p.exitedLocked()
}

// ReadyLine is the line that matched Ready in the current incarnation.
func (p *Proc) ReadyLine() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ready
}

// Output is what the current incarnation printed.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// ExitErr is the current incarnation's exit error (nil while running).
func (p *Proc) ExitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// Pid of the current incarnation (0 if never started).
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// signal sends sig to the current incarnation.
func (p *Proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.exitedLocked() {
		return fmt.Errorf("%s: not running", p.spec.Name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%s: %v: %w", p.spec.Name, sig, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT, syscall.SIGKILL: // a stopped process dies of SIGKILL too
		p.paused = false
	}
	return nil
}

// wait waits for the current incarnation to exit.
func (p *Proc) wait(ctx context.Context) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s still running: %w", p.spec.Name, ctx.Err())
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill(ctx context.Context) error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return p.wait(ctx)
}

// Term sends SIGTERM and waits for the exit.
func (p *Proc) Term(ctx context.Context) error {
	if err := p.signal(syscall.SIGTERM); err != nil {
		return err
	}
	return p.wait(ctx)
}

// Pause sends SIGSTOP: the process keeps its sockets and state but does
// nothing (a zombie leader, a long GC pause).
func (p *Proc) Pause() error { return p.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT.
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT) }

// Restart kills the process if it runs and starts it again.
func (p *Proc) Restart(ctx context.Context) error {
	if p.Running() {
		if err := p.Kill(ctx); err != nil {
			return err
		}
	}
	return p.Start(ctx)
}

// Stop ends the process for good (resuming it first if paused, then SIGKILL)
// and closes its log. For cleanups.
func (p *Proc) Stop() {
	p.mu.Lock()
	paused := p.paused
	p.mu.Unlock()
	if p.Running() {
		if paused {
			_ = p.Resume()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = p.Kill(ctx)
		cancel()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.logFile != nil {
		p.logFile.Close()
		p.logFile = nil
	}
}

// ErrNotRoot is returned by helpers that need root.
var ErrNotRoot = errors.New("faults: needs root (network namespaces, iptables, mounts)")

// run runs a command and returns an error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
