package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestTakeDistinctOutsideEphemeral: ports are distinct, below the
// ephemeral range, bindable, and a reserved port is not handed out again
// while held.
func TestTakeDistinctOutsideEphemeral(t *testing.T) {
	lo, hi := window()
	ports := Take(t, 20)
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lo || p >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("reserved port %d does not bind: %v", p, err)
		}
		l.Close()
	}
	for _, p := range ports {
		if f, ok := lock(p); ok {
			f.Close()
			// flock is per open file description: a second lock from this
			// process must fail as another process's would.
			t.Fatalf("port %d locked again while reserved", p)
		}
	}
}

// TestBusyPortSkipped: a port some listener holds does not count as free.
func TestBusyPortSkipped(t *testing.T) {
	p := Take(t, 1)[0]
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if bindable(p) {
		t.Fatalf("a listened port counts as bindable")
	}
}
