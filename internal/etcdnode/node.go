// Package etcdnode runs the embedded etcd member of a Strata controller
// node: its start (a new cluster, or joining one as a learner), the
// controller listener that carries both etcd's peer traffic and its client
// gRPC, membership changes, compaction and defragmentation, and its health
// as metrics. It is the only package that imports etcd's server packages.
//
// One port per controller. Kafka's controller.quorum.voters names one
// address per controller (id@host:port, the controller listener). etcd
// serves peers (HTTP/1.1, rafthttp) and clients (gRPC over HTTP/2) on
// separate listeners, and its peer listener does not serve client gRPC
// (etcd v3.7.3 embed.servePeers serves only the peer handler). So the
// controller listener is Strata's: it reads a connection's first bytes and
// hands an HTTP/2 connection (the client preface "PRI * HTTP/2.0") to
// etcd's client listener and anything else to etcd's peer listener, both
// bound by etcd on loopback ports of their own. A voter's address is
// therefore both its etcd peer URL and the endpoint every broker's etcd
// client dials: no second port to configure.
package etcdnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Voter is one entry of controller.quorum.voters: a controller's node id
// and the host:port of its controller listener.
type Voter struct {
	ID   int32
	Host string
	Port int
}

// Addr is host:port.
func (v Voter) Addr() string { return net.JoinHostPort(v.Host, strconv.Itoa(v.Port)) }

// URL is the voter's etcd peer (and client) URL.
func (v Voter) URL() string { return "http://" + v.Addr() }

// MemberName is the etcd member name of a controller node: "strata-<id>".
func MemberName(id int32) string { return "strata-" + strconv.Itoa(int(id)) }

// NodeIDOfMember parses a member name written by MemberName (false when the
// name is not one).
func NodeIDOfMember(name string) (int32, bool) {
	s, ok := strings.CutPrefix(name, "strata-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 32)
	return int32(n), err == nil
}

// ParseVoters parses Kafka's controller.quorum.voters syntax:
// "id@host:port,id@host:port" (KRaftConfigs QUORUM_VOTERS_CONFIG; IPv6
// hosts in brackets).
func ParseVoters(s string) ([]Voter, error) {
	var out []Voter
	seen := map[int32]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		idStr, addr, ok := strings.Cut(item, "@")
		if !ok {
			return nil, fmt.Errorf("controller.quorum.voters entry %q is not id@host:port", item)
		}
		id, err := strconv.ParseInt(idStr, 10, 32)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("controller.quorum.voters entry %q: %q is not a node id", item, idStr)
		}
		host, portStr, err := net.SplitHostPort(addr)
		if err != nil || host == "" {
			return nil, fmt.Errorf("controller.quorum.voters entry %q: %q is not host:port", item, addr)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil || port <= 0 || port > 65535 {
			return nil, fmt.Errorf("controller.quorum.voters entry %q: port %q is not 1-65535", item, portStr)
		}
		if seen[int32(id)] {
			return nil, fmt.Errorf("controller.quorum.voters names node %d twice", id)
		}
		seen[int32(id)] = true
		out = append(out, Voter{ID: int32(id), Host: host, Port: port})
	}
	return out, nil
}

// FormatVoters is the inverse of ParseVoters.
func FormatVoters(vs []Voter) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%d@%s", v.ID, v.Addr())
	}
	return strings.Join(parts, ",")
}

// Timing is the member's Raft timing.
type Timing struct {
	TickMs     uint // heartbeat interval; etcd's default 100
	ElectionMs uint // election timeout; etcd's default 1000
}

// DefaultTiming is etcd's own default: 100 ms heartbeats, 1 s election
// timeout. Both are well under broker.session.timeout.ms (9 s), so a lost
// etcd leader is replaced long before any broker's lease can expire for
// lack of one.
var DefaultTiming = Timing{TickMs: 100, ElectionMs: 1000}

// Config is what a member needs to start.
type Config struct {
	// NodeID is this controller's node.id.
	NodeID int32
	// Dir is the member's data directory (WAL and snapshots under it).
	Dir string
	// Listener is the bound controller listener. The Node owns it from
	// Start on and closes it on Close.
	Listener net.Listener
	// Voters is controller.quorum.voters. It must name NodeID with the
	// address Listener is bound to (or advertises). Ignored when the
	// member has data (its membership is then etcd's).
	Voters []Voter
	// Join, when set, is the initial cluster ("name=url,...") of an
	// existing cluster this node was added to as a learner (see
	// AddLearner); the member starts with ClusterState "existing".
	Join string
	// ClusterToken is etcd's initial-cluster-token: members started with
	// different tokens form different clusters.
	ClusterToken string
	// Timing is the Raft timing (DefaultTiming when zero).
	Timing Timing
	// MaxTxnOps bounds the operations of one transaction (etcd's
	// max-txn-ops, default 128); the controller batches partition changes
	// up to it.
	MaxTxnOps uint
	// QuotaBackendBytes is the backend size quota (DefaultQuotaBackendBytes
	// when 0).
	QuotaBackendBytes int64
	// DefragInterval is how often the member checks whether its backend
	// deserves defragmentation (0: 10 minutes; negative: never).
	DefragInterval time.Duration
	// Logger receives etcd's warnings and errors.
	Logger *slog.Logger
}

// Node is a running embedded etcd member.
type Node struct {
	cfg        Config
	e          *embed.Etcd
	clientAddr string // etcd's own loopback client listener
	peerAddr   string // etcd's own loopback peer listener
	logger     *slog.Logger

	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[net.Conn]struct{}

	closeOnce sync.Once
	closeErr  error
}

// Disk use of the metadata store (docs/cluster.md "Disk use of the
// metadata store"). It shares the first log dir unless metadata.log.dir is
// set, and etcd stops the process when a WAL or backend write meets a full
// disk, so its footprint is bounded and the data plane leaves room for it
// (strata.log.min.free.bytes, storage.Reserve):
//   - backend (bbolt): at most DefaultQuotaBackendBytes; past it etcd raises
//     its NOSPACE alarm and refuses writes (a retriable error to clients)
//     until the member compacts, defragments and disarms it (spaceLoop);
//     defragmentation copies the live data (at most the quota) once more;
//   - WAL: segments of wal.SegmentSizeBytes (64 MB, preallocated; etcd
//     advises against changing it), MaxWALFiles closed ones kept, plus the
//     active one and the ones preallocated ahead (0.tmp, 1.tmp), with a
//     snapshot (which
//     releases older segments) every SnapshotCount entries;
//   - snapshots: MaxSnapFiles membership snapshots of a few KiB.
//
// Memory (docs/cluster.md "Memory of the metadata store"): etcd keeps the
// Raft entries since its last snapshot, and SnapshotCatchUpEntries before
// it, in memory (raft MemoryStorage), and a restart reads those since the
// last snapshot back from the WAL. etcd counts entries, not bytes, and
// Strata's entries are large (a batched transaction of 1,024 partition
// changes is ~280 KB: a CreateTopics of 1,000 partitions, or the new
// leader epochs of 1,000 partitions at every broker restart), so etcd's
// defaults (10,000 and 5,000) would hold up to ~4 GB and a restart of a
// 10,000-partition broker added ~2.8 MB to the heap of every later start.
// etcd's maintenance guide ("Raft log retention"): a higher
// --snapshot-count "holds more Raft entries in memory until snapshot,
// thus causing recurrent higher memory usage"; lowering
// --snapshot-catchup-entries is etcd's answer for large values
// (etcd-io/etcd discussion 17673, issue 12548). What a lower catch-up
// count changes: a follower (or learner) further behind than the entries
// kept receives the leader's snapshot (its whole backend, which Strata
// bounds by its quota) instead of entries: Raft's normal path for a
// lagging or new member, correct, only dearer. Strata's metadata changes
// are rare and batched (a broker's restart with 10,000 partitions is ten
// entries), so a live follower is seldom more than a few entries behind.
// A snapshot to disk is a backend commit and a small membership snapshot
// file (etcd v3.7: the data is in the backend), a few fsyncs per
// SnapshotCount entries.
const (
	DefaultQuotaBackendBytes = 256 << 20
	MaxWALFiles              = 2
	MaxSnapFiles             = 2
	SnapshotCount            = 8
	// SnapshotCatchUpEntries is etcd's snapshot-catchup-entries: the
	// entries kept in memory behind a snapshot for followers to catch up
	// from (see above).
	SnapshotCatchUpEntries = 8
	// walSegmentBytes is etcd's wal.SegmentSizeBytes (64 MB).
	walSegmentBytes = 64 * 1000 * 1000
)

// DefaultMaxTxnOps is the max-txn-ops Strata runs etcd with: large enough
// that one controller decision about many partitions (a broker's death
// with a few thousand leaderships) is a handful of transactions.
const DefaultMaxTxnOps = 1024

// Start starts the member and waits until it has applied its own
// membership (ready to serve) or ctx ends. A single-member cluster elects
// itself at once (etcd fast-forwards the election ticks of a one-voter
// cluster); a member of a larger cluster is ready when its peers answer.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Listener == nil {
		return nil, errors.New("etcdnode: no controller listener")
	}
	// The Node owns the listener from here on: a start that fails before
	// the Node exists closes it (after, Node.Close does), so that the
	// port is free for the next start in the same process.
	owned := false
	defer func() {
		if !owned {
			cfg.Listener.Close()
		}
	}()
	if cfg.Timing == (Timing{}) {
		cfg.Timing = DefaultTiming
	}
	if cfg.MaxTxnOps == 0 {
		cfg.MaxTxnOps = DefaultMaxTxnOps
	}
	if cfg.DefragInterval == 0 {
		cfg.DefragInterval = 10 * time.Minute
	}
	if cfg.QuotaBackendBytes == 0 {
		cfg.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	_, statErr := os.Stat(cfg.Dir)
	created := errors.Is(statErr, fs.ErrNotExist)
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcd data dir: %w", err)
	}
	if err := checkStartSpace(cfg.Dir); err != nil {
		return nil, err
	}
	ec, err := embedConfig(cfg)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	e, err := embed.StartEtcd(ec)
	if err != nil {
		if created {
			// A first start that failed leaves no member data behind, so
			// that `strata controller add` (which wants an empty directory)
			// and the next start see a new member's directory again.
			os.RemoveAll(cfg.Dir)
		}
		if strings.Contains(err.Error(), "has already been bootstrapped") {
			// etcd's bootstrap check (isMemberBootstrapped): the peers list
			// this member as started, but this directory holds no data.
			return nil, fmt.Errorf("start etcd member %[1]s in %[2]s: %[3]w: the other controllers know controller %[4]d as a member, but this directory holds no metadata store data (a new or wiped disk); "+
				"remove it with `strata controller remove --controller-id %[4]d`, add it back with `strata controller add --controller-id %[4]d --controller-address %[5]s --metadata-dir <its metadata.log.dir or first log dir>`, then start it again (docs/cluster.md \"Adding and removing controllers\")",
				MemberName(cfg.NodeID), cfg.Dir, err, cfg.NodeID, cfg.Listener.Addr().String())
		}
		return nil, fmt.Errorf("start etcd member %s in %s: %w", MemberName(cfg.NodeID), cfg.Dir, err)
	}
	opened := time.Since(start) // the WAL replayed, the backend open
	n := &Node{
		cfg: cfg, e: e, logger: cfg.Logger,
		clientAddr: e.Clients[0].Addr().String(),
		peerAddr:   e.Peers[0].Listener.Addr().String(),
		stop:       make(chan struct{}),
		conns:      map[net.Conn]struct{}{},
	}
	owned = true
	n.wg.Add(1)
	go n.serveFront()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		n.Close()
		return nil, fmt.Errorf("etcd member %s: %w", MemberName(cfg.NodeID), err)
	case <-ctx.Done():
		n.Close()
		return nil, fmt.Errorf("etcd member %s not ready: %w (are a majority of controller.quorum.voters running and reachable?)", MemberName(cfg.NodeID), ctx.Err())
	}
	ready := time.Since(start) // a Raft leader elected, the member published
	if err := n.moveSelf(ctx); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.checkVoters(); err != nil {
		n.Close()
		return nil, err
	}
	if cfg.DefragInterval > 0 {
		n.wg.Add(1)
		go n.defragLoop()
	}
	n.wg.Add(1)
	go n.spaceLoop()
	cfg.Logger.Debug("metadata store member started", "open", opened, "ready", ready, "took", time.Since(start))
	return n, nil
}

// checkVoters compares the membership the member found (from its data,
// or from the cluster it joined) with controller.quorum.voters: this
// node's own peer address must be its voter address, since that is where
// the other controllers and every broker reach it. Other differences (a
// controller added or removed since the voters were written) are logged.
func (n *Node) checkVoters() error {
	if len(n.cfg.Voters) == 0 {
		return nil
	}
	want := map[int32]Voter{}
	for _, v := range n.cfg.Voters {
		want[v.ID] = v
	}
	for _, m := range n.e.Server.Cluster().Members() {
		id, ok := NodeIDOfMember(m.Name)
		if !ok || len(m.PeerURLs) == 0 {
			continue
		}
		v, listed := want[id]
		switch {
		case id == n.cfg.NodeID && listed && m.PeerURLs[0] != v.URL():
			return fmt.Errorf("controller.quorum.voters names this node (%d) at %s, but its metadata store in %s was created at %s: the voter list disagrees with the cluster (restore the old address, or remove and re-add this controller)",
				id, v.Addr(), n.cfg.Dir, strings.TrimPrefix(m.PeerURLs[0], "http://"))
		case !listed:
			n.logger.Warn("metadata store member is not in controller.quorum.voters", "node", id, "address", m.PeerURLs[0])
		case m.PeerURLs[0] != v.URL():
			n.logger.Warn("controller.quorum.voters disagrees with the metadata store membership", "node", id,
				"voters", v.Addr(), "member", m.PeerURLs[0])
		}
	}
	return nil
}

// moveSelf records this member's voter address as its peer address when
// it is the store's only member and the address changed since the last
// start: zero configuration's controller listener is a port chosen at each
// start, and a one-node cluster may later be given explicit KRaft settings
// on the same data. No other member dials it, so the change is safe, and
// it commits at once (the member is its own quorum). A member of a larger
// store is refused instead (checkVoters).
func (n *Node) moveSelf(ctx context.Context) error {
	members := n.e.Server.Cluster().Members()
	var want string
	for _, v := range n.cfg.Voters {
		if v.ID == n.cfg.NodeID {
			want = v.URL()
		}
	}
	if len(members) != 1 || want == "" || uint64(members[0].ID) != n.MemberID() ||
		(len(members[0].PeerURLs) > 0 && members[0].PeerURLs[0] == want) {
		return nil
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.ClientEndpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("metadata store client: %w", err)
	}
	defer cli.Close()
	if _, err := cli.MemberUpdate(ctx, n.MemberID(), []string{want}); err != nil {
		return fmt.Errorf("record the controller listener %s in the metadata store: %w", want, err)
	}
	for n.e.Server.Cluster().Member(n.e.Server.MemberID()).PeerURLs[0] != want {
		select {
		case <-ctx.Done():
			return fmt.Errorf("record the controller listener %s in the metadata store: %w", want, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// hasData reports whether dir holds a member's WAL already.
func hasData(dir string) bool {
	ents, err := os.ReadDir(filepath.Join(dir, "member", "wal"))
	return err == nil && len(ents) > 0
}

func embedConfig(cfg Config) (*embed.Config, error) {
	self := cfg.Listener.Addr().String()
	ec := embed.NewConfig()
	ec.Name = MemberName(cfg.NodeID)
	ec.Dir = cfg.Dir
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(newZapLogger(cfg.Logger, zapcore.WarnLevel))
	ec.TickMs = cfg.Timing.TickMs
	ec.ElectionMs = cfg.Timing.ElectionMs
	ec.MaxTxnOps = cfg.MaxTxnOps
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	ec.MaxWalFiles = MaxWALFiles
	ec.MaxSnapFiles = MaxSnapFiles
	ec.SnapshotCount = SnapshotCount
	ec.SnapshotCatchUpEntries = SnapshotCatchUpEntries
	// Metadata is small and changes slowly: keep an hour of history for
	// watchers that reconnect, and compact the rest (a watcher that falls
	// further behind reloads everything; see meta.Cache).
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = "1h"
	ec.BootstrapDefragThresholdMegabytes = 64
	ec.EnableGRPCGateway = false
	ec.Metrics = "basic"
	ec.StrictReconfigCheck = true
	ec.PreVote = true
	// etcd's own listeners stay on loopback; the controller listener in
	// front of them is what other nodes reach.
	loop, _ := url.Parse("http://127.0.0.1:0")
	ec.ListenPeerUrls = []url.URL{*loop}
	ec.ListenClientUrls = []url.URL{*loop}
	adv, err := url.Parse("http://" + advertisedAddr(self, cfg))
	if err != nil {
		return nil, fmt.Errorf("controller listener address %s: %w", self, err)
	}
	ec.AdvertisePeerUrls = []url.URL{*adv}
	ec.AdvertiseClientUrls = []url.URL{*adv}
	ec.InitialClusterToken = cfg.ClusterToken
	switch {
	case hasData(cfg.Dir):
		// A restart: membership comes from the member's own data.
		ec.ClusterState = embed.ClusterStateFlagExisting
		ec.InitialCluster = ec.Name + "=" + adv.String()
	case cfg.Join != "":
		ec.ClusterState = embed.ClusterStateFlagExisting
		ec.InitialCluster = cfg.Join
	default:
		ec.ClusterState = embed.ClusterStateFlagNew
		parts := make([]string, 0, len(cfg.Voters))
		found := false
		for _, v := range cfg.Voters {
			parts = append(parts, MemberName(v.ID)+"="+v.URL())
			found = found || v.ID == cfg.NodeID
		}
		if !found {
			return nil, fmt.Errorf("controller.quorum.voters (%s) does not name this node (node.id %d)", FormatVoters(cfg.Voters), cfg.NodeID)
		}
		ec.InitialCluster = strings.Join(parts, ",")
	}
	return ec, nil
}

// advertisedAddr is this node's address as the voter list names it (the
// listener may be bound to 0.0.0.0 or port 0 in tests).
func advertisedAddr(bound string, cfg Config) string {
	for _, v := range cfg.Voters {
		if v.ID == cfg.NodeID {
			return v.Addr()
		}
	}
	return bound
}

// ClientEndpoint is the URL this process's own etcd client should dial: the
// member's loopback client listener, bypassing the controller listener.
func (n *Node) ClientEndpoint() string { return "http://" + n.clientAddr }

// MemberID is this member's etcd id.
func (n *Node) MemberID() uint64 { return uint64(n.e.Server.MemberID()) }

// IsLeader reports whether this member is etcd's Raft leader now.
func (n *Node) IsLeader() bool { return n.e.Server.Leader() == n.e.Server.MemberID() }

// Err delivers a fatal error of the member (its server stopped).
func (n *Node) Err() <-chan error { return n.e.Err() }

// serveFront accepts on the controller listener and routes each
// connection to etcd's client or peer listener by its first bytes.
func (n *Node) serveFront() {
	defer n.wg.Done()
	for {
		c, err := n.cfg.Listener.Accept()
		if err != nil {
			select {
			case <-n.stop:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			n.logger.Error("controller listener accept failed", "err", err)
			return
		}
		if !n.track(c, true) {
			c.Close()
			return
		}
		n.wg.Add(1)
		go n.route(c)
	}
}

// track adds or removes a connection from the set closed by Close; it
// reports false once the node is closing.
func (n *Node) track(c net.Conn, add bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !add {
		delete(n.conns, c)
		return true
	}
	if n.conns == nil {
		return false
	}
	n.conns[c] = struct{}{}
	return true
}

// http2Preface is the start of every HTTP/2 connection (RFC 9113 §3.4),
// which is how gRPC clients open theirs.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func (n *Node) route(c net.Conn) {
	defer n.wg.Done()
	defer n.track(c, false)
	defer c.Close()
	head := make([]byte, 3)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, head); err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	target := n.peerAddr
	if string(head) == http2Preface[:3] {
		target = n.clientAddr
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		n.logger.Warn("controller listener: local etcd unreachable", "target", target, "err", err)
		return
	}
	if !n.track(up, true) {
		up.Close()
		return
	}
	defer n.track(up, false)
	defer up.Close()
	if _, err := up.Write(head); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); closeWrite(c); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
		return
	}
	_ = c.Close()
}

// Close stops the member: the controller listener and its connections
// first (so peers see this member gone), then etcd itself.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		close(n.stop)
		n.cfg.Listener.Close()
		n.mu.Lock()
		for c := range n.conns {
			c.Close()
		}
		n.conns = nil
		n.mu.Unlock()
		n.e.Close()
		n.wg.Wait()
	})
	return n.closeErr
}

// defragLoop defragments the member's backend when more than half of it
// (and at least 64 MiB) is free pages left by compaction. Defragmentation
// blocks the member briefly, so it runs rarely and only when it pays.
func (n *Node) defragLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.DefragInterval)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		be := n.e.Server.Backend()
		size, inUse := be.Size(), be.SizeInUse()
		if size-inUse < 64<<20 || inUse*2 > size {
			continue
		}
		if err := n.Defragment(context.Background()); err != nil {
			n.logger.Warn("etcd defragmentation failed", "err", err)
		}
	}
}

// Defragment defragments this member's backend now.
func (n *Node) Defragment(ctx context.Context) error {
	cli, err := n.localClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = cli.Defragment(ctx, n.ClientEndpoint())
	if err == nil {
		n.ReleaseBackendPages() // the defragmented file is mapped anew
	}
	return err
}

// ReleaseBackendPages gives the resident pages of the backend's memory
// map back to the kernel (issue 18). On Linux etcd maps its bbolt file
// with MAP_POPULATE (etcd storage/backend/config_linux.go: "faster
// key-value store recovery"), which reads the whole file in, and bbolt
// grows the file by its AllocSize (16 MiB) past the data whenever it needs
// a page, so after every start the whole file, data and the never-written
// tail alike, is resident: ~16 MB of RSS for ~3 MB of metadata at 10,000
// partitions. The member has read what it needs by then (mvcc restore
// builds its key index in memory, the broker's cache loaded the view);
// later reads fault back in only the pages they touch. The server calls
// it once the node is ready; Defragment calls it after mapping a new
// file. Nothing is lost if it fails: the pages stay resident.
func (n *Node) ReleaseBackendPages() {
	path := n.e.Server.Cfg.BackendPath()
	if _, err := releaseMapped(path); err != nil {
		n.logger.Debug("metadata store pages not released", "path", path, "err", err)
	}
}

func (n *Node) localClient() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{n.ClientEndpoint()}, DialTimeout: 5 * time.Second,
		Logger: newZapLogger(n.logger, zapcore.ErrorLevel)})
}

// Status is a snapshot of the member's health, for metrics and
// `strata cluster status`.
type Status struct {
	MemberID      uint64
	LeaderID      uint64 // 0: no leader known
	IsLeader      bool
	IsLearner     bool
	Term          uint64
	DBSize        int64 // backend file size
	DBSizeInUse   int64 // bytes holding live data
	Members       int
	AppliedIndex  uint64
	CommitedIndex uint64
}

// Status returns the member's current health without any network call.
func (n *Node) Status() Status {
	s := n.e.Server
	be := s.Backend()
	return Status{
		MemberID: uint64(s.MemberID()), LeaderID: uint64(s.Leader()), IsLeader: s.Leader() == s.MemberID(),
		IsLearner: s.IsLearner(), Term: s.Term(), DBSize: be.Size(), DBSizeInUse: be.SizeInUse(),
		Members: len(s.Cluster().Members()), AppliedIndex: s.AppliedIndex(), CommitedIndex: s.CommittedIndex(),
	}
}

// Member is one etcd member as Strata sees it.
type Member struct {
	ID        uint64
	NodeID    int32 // from the member name; -1 when it is not a Strata member
	Name      string
	PeerURL   string
	IsLearner bool
}

// Members lists the cluster's members (voters and learners) through a
// client, sorted by node id.
func Members(ctx context.Context, cli *clientv3.Client) ([]Member, error) {
	return members(ctx, cli)
}

// MembersLocal is Members as the member the client reaches knows them
// (a serializable read): it answers without a quorum, so a tool can say
// why a change would lose it.
func MembersLocal(ctx context.Context, cli *clientv3.Client) ([]Member, error) {
	return members(ctx, cli, clientv3.WithSerializable())
}

func members(ctx context.Context, cli *clientv3.Client, opts ...clientv3.OpOption) ([]Member, error) {
	resp, err := cli.MemberList(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("list etcd members: %w", err)
	}
	out := make([]Member, 0, len(resp.Members))
	for _, m := range resp.Members {
		id, ok := NodeIDOfMember(m.Name)
		if !ok {
			id = -1
		}
		peer := ""
		if len(m.PeerURLs) > 0 {
			peer = m.PeerURLs[0]
		}
		out = append(out, Member{ID: m.ID, NodeID: id, Name: m.Name, PeerURL: peer, IsLearner: m.IsLearner})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out, nil
}

// AddLearner adds controller node id at address host:port to the cluster
// as a non-voting learner (etcd MemberAddAsLearner) and returns the
// initial-cluster string that node must start with (Config.Join). The new
// member catches up from the leader's snapshot before it can vote, so the
// quorum is never at risk while it does.
func AddLearner(ctx context.Context, cli *clientv3.Client, v Voter) (join string, err error) {
	// etcd (StrictReconfigCheck) refuses membership changes until every
	// member has been connected for a few seconds ("unhealthy cluster"),
	// e.g. just after a start: retry that until ctx ends.
	var resp *clientv3.MemberAddResponse
	for {
		resp, err = cli.MemberAddAsLearner(ctx, []string{v.URL()})
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "unhealthy cluster") {
			return "", fmt.Errorf("add controller %d at %s as an etcd learner: %w", v.ID, v.Addr(), err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("add controller %d at %s as an etcd learner: %w (last: %v)", v.ID, v.Addr(), ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
	parts := []string{}
	for _, m := range resp.Members {
		name := m.Name
		if m.ID == resp.Member.ID {
			name = MemberName(v.ID)
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	return strings.Join(parts, ","), nil
}

// Promote makes a caught-up learner a voter (etcd MemberPromote). etcd
// refuses while the learner lags ("can only promote a learner member which
// is in sync with leader"); Promote retries until ctx ends.
func Promote(ctx context.Context, cli *clientv3.Client, nodeID int32) error {
	for {
		ms, err := Members(ctx, cli)
		if err != nil {
			return err
		}
		var target *Member
		for i := range ms {
			if ms[i].NodeID == nodeID {
				target = &ms[i]
			}
		}
		if target == nil {
			return fmt.Errorf("controller %d is not an etcd member", nodeID)
		}
		if !target.IsLearner {
			return nil
		}
		_, err = cli.MemberPromote(ctx, target.ID)
		if err == nil {
			return nil
		}
		if !strings.Contains(err.Error(), "in sync") && !strings.Contains(err.Error(), "not started") {
			return fmt.Errorf("promote controller %d: %w", nodeID, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("promote controller %d: learner not caught up: %w", nodeID, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Remove removes controller nodeID from the etcd membership. etcd refuses
// (with StrictReconfigCheck) when removing it would leave the remaining
// voters without a quorum of started members.
func Remove(ctx context.Context, cli *clientv3.Client, nodeID int32) error {
	ms, err := Members(ctx, cli)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.NodeID == nodeID {
			if _, err := cli.MemberRemove(ctx, m.ID); err != nil {
				return fmt.Errorf("remove controller %d: %w", nodeID, err)
			}
			return nil
		}
	}
	return fmt.Errorf("controller %d is not an etcd member", nodeID)
}

// JoinFile is where `strata controller add` leaves the initial cluster a
// new controller joins with (Config.Join), under the node's
// metadata directory (the parent of its member directory): read at the
// node's first start, removed once the member has its own data.
func JoinFile(metadataDir string) string {
	return filepath.Join(metadataDir, "__strata_metadata", "join")
}

// MemberDir is the member's data directory under a node's metadata
// directory (metadata.log.dir, or the first log dir).
func MemberDir(metadataDir string) string {
	return filepath.Join(metadataDir, "__strata_metadata", "etcd")
}

// ReadJoin returns the initial cluster `strata controller add` left for a
// node that has no member data yet ("" when there is none, or when the
// member already has data).
func ReadJoin(metadataDir string) (string, error) {
	if hasData(MemberDir(metadataDir)) {
		return "", nil
	}
	b, err := os.ReadFile(JoinFile(metadataDir))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", JoinFile(metadataDir), err)
	}
	return strings.TrimSpace(string(b)), nil
}

// PromoteSelf makes a member that joined as a learner a voter once it has
// caught up, through the other voters (a learner serves no client
// requests), then waits until this member serves reads. It returns at once
// for a voter.
func (n *Node) PromoteSelf(ctx context.Context, nodeID int32, others []string) error {
	if !n.e.Server.IsLearner() {
		return nil
	}
	cli, err := clientv3.New(ClientConfig(nil, others...))
	if err != nil {
		return fmt.Errorf("promote controller %d: %w", nodeID, err)
	}
	defer cli.Close()
	if err := Promote(ctx, cli, nodeID); err != nil {
		return err
	}
	for n.e.Server.IsLearner() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("controller %d promoted but still a learner here: %w", nodeID, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}
