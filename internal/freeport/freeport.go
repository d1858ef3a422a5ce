// Package freeport hands out loopback TCP ports to tests that must know a
// port before the process that binds it starts: a broker restarted on the
// same port after a SIGKILL, the controller ports of
// controller.quorum.voters, a kfake restarted in place.
//
// Binding 127.0.0.1:0, reading the port and closing the listener is racy:
// the kernel hands the same ephemeral range to every connect() and bind(:0)
// on the machine, so another test's client socket or listener can take the
// port before the broker binds it ("bind: address already in use"). Ports
// from here come from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), which connect() and bind(:0) never pick,
// and each is reserved across test processes by an exclusive flock on
// /tmp/strata-freeport/<port> held until the test ends (the kernel drops it
// when the process dies). A port is handed out only if it also binds right
// now, so a foreign process holding it is skipped. What remains possible:
// a process outside these tests binding the same fixed port; it fails the
// start loudly, never silently.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// lockDir holds one lock file per reserved port.
var lockDir = filepath.Join(os.TempDir(), "strata-freeport")

// Take reserves n distinct ports until t ends and returns them.
func Take(t testing.TB, n int) []int {
	t.Helper()
	ports, release, err := Reserve(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return ports
}

// Addr reserves one port until t ends and returns "127.0.0.1:<port>".
func Addr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(Take(t, 1)[0])
}

// Reserve reserves n distinct ports; release gives them back.
func Reserve(n int) (ports []int, release func(), err error) {
	if err := os.MkdirAll(lockDir, 0o777); err != nil {
		return nil, nil, fmt.Errorf("freeport: %w", err)
	}
	lo, hi := window()
	var held []*os.File
	release = func() {
		for _, f := range held {
			f.Close() // drops the flock
		}
	}
	for tries := 0; len(ports) < n; tries++ {
		if tries > 2000 {
			release()
			return nil, nil, fmt.Errorf("freeport: no free port in [%d, %d) after %d tries", lo, hi, tries)
		}
		p := lo + rand.IntN(hi-lo)
		f, ok := lock(p)
		if !ok {
			continue
		}
		if !bindable(p) {
			f.Close()
			continue
		}
		held = append(held, f)
		ports = append(ports, p)
	}
	return ports, release, nil
}

// window is the range ports are drawn from: below the ephemeral range's
// first port and above the well-known ports and docs/cluster.md's fixed
// example ports (19092..19394).
func window() (lo, hi int) {
	lo, hi = 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if first, err := strconv.Atoi(f[0]); err == nil && first > lo+1000 {
				hi = first
			}
		}
	}
	return lo, hi
}

// lock takes port p's lock file without waiting.
func lock(p int) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// bindable reports whether p can be listened on now, on loopback and on
// every address (a listener on 0.0.0.0 would make the loopback bind fail).
func bindable(p int) bool {
	for _, host := range []string{"127.0.0.1", "0.0.0.0"} {
		l, err := net.Listen("tcp4", net.JoinHostPort(host, strconv.Itoa(p)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}
