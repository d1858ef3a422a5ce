package faults

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
)

// Net is a set of network namespaces, one per node, each joined by a veth
// pair to a bridge in the calling (root) namespace. Node i has address
// 10.<a>.<b>.<10+i>/24; the bridge (the test process's side, where clients
// run) has .1. Nodes reach each other and the clients over the bridge;
// iptables rules inside each node's namespace cut traffic.
type Net struct {
	id     string // short unique id in every name
	subnet string // "10.a.b"
	nodes  []string

	mu     sync.Mutex
	closed bool
}

// NewNet creates n namespaces. It fails (never skips) when `ip` or
// `iptables` is missing or the caller is not root.
func NewNet(n int) (*Net, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("faults: %s not found (scripts/test.sh installs it): %w", tool, err)
		}
	}
	r := rand.Uint32()
	nt := &Net{
		id:     fmt.Sprintf("%05x", r&0xfffff),
		subnet: fmt.Sprintf("10.%d.%d", 200+int(r>>20)%50, int(r>>8)%256),
	}
	if err := nt.setup(n); err != nil {
		nt.Close()
		return nil, err
	}
	return nt, nil
}

func (nt *Net) bridge() string        { return "stb" + nt.id }
func (nt *Net) hostVeth(i int) string { return fmt.Sprintf("sth%s%d", nt.id, i) }

// Netns is node i's namespace name (for ProcSpec.Netns).
func (nt *Net) Netns(i int) string { return nt.nodes[i] }

// IP is node i's address.
func (nt *Net) IP(i int) string { return fmt.Sprintf("%s.%d", nt.subnet, 10+i) }

// HostIP is the bridge's address: where clients in the root namespace
// connect from.
func (nt *Net) HostIP() string { return nt.subnet + ".1" }

// Len is the number of nodes.
func (nt *Net) Len() int { return len(nt.nodes) }

func (nt *Net) setup(n int) error {
	br := nt.bridge()
	if err := run("ip", "link", "add", br, "type", "bridge"); err != nil {
		return err
	}
	nt.nodes = make([]string, 0, n) // so Close deletes the bridge even if a node fails
	if err := run("ip", "addr", "add", nt.HostIP()+"/24", "dev", br); err != nil {
		return err
	}
	if err := run("ip", "link", "set", br, "up"); err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("stn%s-%d", nt.id, i)
		if err := run("ip", "netns", "add", ns); err != nil {
			return err
		}
		nt.nodes = append(nt.nodes, ns)
		host, peer := nt.hostVeth(i), fmt.Sprintf("stp%s%d", nt.id, i)
		steps := [][]string{
			{"ip", "link", "add", host, "type", "veth", "peer", "name", peer},
			{"ip", "link", "set", peer, "netns", ns},
			{"ip", "link", "set", host, "master", br},
			{"ip", "link", "set", host, "up"},
			{"ip", "-n", ns, "link", "set", "lo", "up"},
			{"ip", "-n", ns, "addr", "add", nt.IP(i) + "/24", "dev", peer},
			{"ip", "-n", ns, "link", "set", peer, "up"},
		}
		for _, s := range steps {
			if err := run(s[0], s[1:]...); err != nil {
				return err
			}
		}
	}
	return nil
}

// iptables runs iptables inside node i's namespace.
func (nt *Net) iptables(i int, args ...string) error {
	return run("ip", append([]string{"netns", "exec", nt.nodes[i], "iptables", "-w"}, args...)...)
}

// Block drops every packet from node `from` to node `to` (a one-way
// partition: `to` never hears `from`; TCP between them then fails in both
// directions, as handshakes need both ways, but datagrams from `to` still
// arrive).
func (nt *Net) Block(from, to int) error {
	return nt.iptables(to, "-A", "INPUT", "-s", nt.IP(from), "-j", "DROP")
}

// Partition cuts a and b apart in both directions.
func (nt *Net) Partition(a, b int) error {
	if err := nt.Block(a, b); err != nil {
		return err
	}
	return nt.Block(b, a)
}

// Split partitions every node of side from every node not in it.
func (nt *Net) Split(side ...int) error {
	in := map[int]bool{}
	for _, i := range side {
		in[i] = true
	}
	for a := range nt.nodes {
		for b := range nt.nodes {
			if in[a] && !in[b] {
				if err := nt.Partition(a, b); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// IsolateFromClients drops traffic between node i and the root namespace
// (the clients); the other nodes still reach it.
func (nt *Net) IsolateFromClients(i int) error {
	if err := nt.iptables(i, "-A", "INPUT", "-s", nt.HostIP(), "-j", "DROP"); err != nil {
		return err
	}
	return nt.iptables(i, "-A", "OUTPUT", "-d", nt.HostIP(), "-j", "DROP")
}

// Heal removes every rule in every namespace.
func (nt *Net) Heal() error {
	var first error
	for i := range nt.nodes {
		for _, chain := range []string{"INPUT", "OUTPUT"} {
			if err := nt.iptables(i, "-F", chain); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// Close deletes the namespaces (and with them the veth pairs) and the
// bridge. Stop the processes inside first.
func (nt *Net) Close() error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if nt.closed {
		return nil
	}
	nt.closed = true
	var first error
	for _, ns := range nt.nodes {
		if err := run("ip", "netns", "del", ns); err != nil && first == nil {
			first = err
		}
	}
	if err := run("ip", "link", "del", nt.bridge()); err != nil && first == nil {
		first = err
	}
	return first
}
