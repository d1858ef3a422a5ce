package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"time"

	"github.com/strata-io/strata/internal/checker"
)

// Fault is one fault that can be injected and healed.
type Fault interface {
	Name() string
	Inject(ctx context.Context) error
	Heal(ctx context.Context) error
}

// FuncFault is a Fault made of two functions.
type FuncFault struct {
	Label       string
	InjectFn    func(context.Context) error
	HealFn      func(context.Context) error
	Description string
}

func (f FuncFault) Name() string                     { return f.Label }
func (f FuncFault) Inject(ctx context.Context) error { return f.InjectFn(ctx) }
func (f FuncFault) Heal(ctx context.Context) error   { return f.HealFn(ctx) }

// KillRestart SIGKILLs p and, on heal, starts it again.
func KillRestart(p *Proc) Fault {
	return FuncFault{Label: "kill -9 " + p.Name(),
		InjectFn: p.Kill,
		HealFn:   p.Start}
}

// PauseResume SIGSTOPs p and, on heal, SIGCONTs it.
func PauseResume(p *Proc) Fault {
	return FuncFault{Label: "SIGSTOP " + p.Name(),
		InjectFn: func(context.Context) error { return p.Pause() },
		HealFn:   func(context.Context) error { return p.Resume() }}
}

// DiskFull fills d and, on heal, frees it.
func DiskFull(d *Disk) Fault {
	return FuncFault{Label: "full disk " + d.Dir,
		InjectFn: func(context.Context) error { return d.Fill() },
		HealFn:   func(context.Context) error { return d.Free() }}
}

// PartitionPair cuts nodes a and b apart (oneWay: only a -> b) and heals
// every rule of nt.
func PartitionPair(nt *Net, a, b int, oneWay bool) Fault {
	name := fmt.Sprintf("partition %d<->%d", a, b)
	inject := func(context.Context) error { return nt.Partition(a, b) }
	if oneWay {
		name = fmt.Sprintf("drop %d->%d", a, b)
		inject = func(context.Context) error { return nt.Block(a, b) }
	}
	return FuncFault{Label: name, InjectFn: inject, HealFn: func(context.Context) error { return nt.Heal() }}
}

// Nemesis injects Faults on a schedule and records each one in a history.
type Nemesis struct {
	Rec    *checker.Recorder
	Faults []Fault
	// Healthy is the time between a heal and the next fault; Faulty how long
	// a fault lasts. Zero: 1 s each.
	Healthy, Faulty time.Duration
	// Rounds bounds the faults injected (0: until ctx ends).
	Rounds int
	// For, when set, bounds the faults by time: no fault is injected once
	// For has passed since the first injection (the one in progress then
	// is still healed), so the faults span at least For.
	For time.Duration
	// Random picks faults at random (seeded) instead of in turn.
	Random bool
	Seed   uint64
	Logf   func(format string, args ...any)
}

// Run injects faults until Rounds or ctx ends. Every injected fault is
// healed before Run returns, even when ctx ends. It returns the number of
// faults injected and the first heal error (a fault that cannot be healed
// leaves the run meaningless).
func (n *Nemesis) Run(ctx context.Context) (int, error) {
	if n.Healthy == 0 {
		n.Healthy = time.Second
	}
	if n.Faulty == 0 {
		n.Faulty = time.Second
	}
	logf := n.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	rng := rand.New(rand.NewPCG(n.Seed, 0x6e656d))
	done := 0
	var first time.Time
	for n.Rounds == 0 || done < n.Rounds {
		if !sleep(ctx, n.Healthy) || (n.For > 0 && done > 0 && time.Since(first) >= n.For) {
			break
		}
		if done == 0 {
			first = time.Now()
		}
		f := n.Faults[done%len(n.Faults)]
		if n.Random {
			f = n.Faults[rng.IntN(len(n.Faults))]
		}
		op := checker.Op{Process: "nemesis", Kind: checker.KindNemesis, Status: checker.OK, Start: n.now(), Note: f.Name()}
		logf("nemesis: inject %s", f.Name())
		if err := f.Inject(ctx); err != nil {
			op.Status, op.Error = checker.Fail, "inject: "+err.Error()
			logf("nemesis: inject %s: %v", f.Name(), err)
		}
		done++
		sleep(ctx, n.Faulty)
		// Heal with a context of its own: a run that is ending still heals.
		hctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := f.Heal(hctx)
		cancel()
		op.End = n.now()
		if err != nil {
			op.Status, op.Error = checker.Fail, op.Error+" heal: "+err.Error()
			n.record(op)
			return done, fmt.Errorf("nemesis: heal %s: %w", f.Name(), err)
		}
		logf("nemesis: healed %s", f.Name())
		n.record(op)
	}
	return done, nil
}

func (n *Nemesis) now() int64 {
	if n.Rec == nil {
		return 0
	}
	return n.Rec.Now()
}

func (n *Nemesis) record(op checker.Op) {
	if n.Rec != nil {
		n.Rec.Add(op)
	}
}

// sleep waits d or until ctx ends; false means ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// StrataReady is the substring of the line a Strata broker prints once it
// serves.
const StrataReady = "strata broker listening"

// StrataNode returns the spec of a single-node `strata serve` on kafkaAddr
// (host:port, fixed so clients find it again after a restart) with its data
// in dir; extra flags follow (the cluster's --node.id, --process.roles,
// --listeners ... replace these when multi-node clusters land).
func StrataNode(bin, name, dir, kafkaAddr string, extra ...string) ProcSpec {
	args := []string{"serve",
		"--listeners", "PLAINTEXT://" + kafkaAddr,
		"--strata.metrics.listener", "127.0.0.1:0",
		"--log.dirs", dir,
		"--strata.log.format", "json",
	}
	return ProcSpec{Name: name, Path: bin, Args: append(args, extra...), Dir: dir, Ready: StrataReady,
		LogPath: dir + ".log"}
}

// BuildStrata runs `go build -o out ./cmd/strata` in the module at root.
func BuildStrata(ctx context.Context, root, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/strata")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/strata: %w", err)
	}
	return nil
}
