package faults

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/faults"
)

// TestPowerCutResumesOnFailure: when one of the brokers of a power cut
// cannot be stopped (here it never started; in a run, it died), the cut is
// abandoned before any disk is touched, the brokers already stopped run
// again, and the error names the broker. Before, they stayed SIGSTOPped
// and the heal (powerOn) failed on their still-mounted disks.
func TestPowerCutResumesOnFailure(t *testing.T) {
	t.Parallel()
	c := &netCluster{disks: make([]*faults.LoopDisk, 3)} // no disk is touched
	for i := 0; i < 3; i++ {
		p := faults.NewProc(faults.ProcSpec{Name: fmt.Sprintf("node-%d", i+1), Path: "sleep", Args: []string{"600"}})
		if i < 2 {
			if err := p.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(p.Stop)
		c.procs = append(c.procs, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cut, err := c.powerCut(ctx, 0, 1, 2)
	if err == nil || !strings.Contains(err.Error(), "cannot stop node-3") || len(cut) != 0 {
		t.Fatalf("powerCut with node-3 down: cut %v, err %v; want nothing cut and an error naming node-3", cut, err)
	}
	for _, p := range c.procs[:2] {
		if st := procState(t, p.Pid()); st == "T" || st == "t" {
			t.Errorf("%s left stopped (state %s) after the failed power cut", p.Name(), st)
		}
	}
	if err := c.powerOn(ctx, cut...); err != nil {
		t.Fatalf("heal of a power cut that cut nothing: %v", err)
	}
}

// procState is the state letter of process pid (/proc/<pid>/stat).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	return f[0]
}
