package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawGroup speaks group requests over one plain connection (kgo would
// retry NOT_COORDINATOR itself; this test wants to see it).
type rawGroup struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialGroup(t *testing.T, addr string) *rawGroup {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawGroup{t: t, c: c}
}

// do sends req and decodes the answer into resp (non-flexible versions
// only, so both headers are the short ones).
func (g *rawGroup) do(req kmsg.Request, resp kmsg.Response) {
	g.t.Helper()
	g.corr++
	if _, err := g.c.Write(frame(req.Key(), req.GetVersion(), g.corr, false, req.AppendTo(nil))); err != nil {
		g.t.Fatal(err)
	}
	corr, body, err := readFrame(g.c)
	if err != nil || corr != g.corr {
		g.t.Fatalf("%s: %v (correlation %d)", kmsg.NameForKey(req.Key()), err, corr)
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		g.t.Fatal(err)
	}
}

// staticJoin sends a JoinGroup v4 of static member instance (a new or
// restarted member) with 64 KiB of user data, so that every group
// metadata record needs new pages of the segment, which a full disk does
// not give.
func (g *rawGroup) staticJoin(group, instance string) *kmsg.JoinGroupResponse {
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version, j.Group, j.InstanceID = 5, group, &instance
	j.SessionTimeoutMillis, j.RebalanceTimeoutMillis, j.ProtocolType = 30000, 30000, "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.UserData = make([]byte, 64<<10)
	p.Name, p.Metadata = "range", meta.AppendTo(nil)
	j.Protocols = append(j.Protocols, p)
	resp := kmsg.NewPtrJoinGroupResponse()
	g.do(j, resp)
	return resp
}

// waitCoordinator asks FindCoordinator for group until the broker
// answers without an error (generous deadline: a loaded machine).
func (g *rawGroup) waitCoordinator(group string) {
	g.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		f := kmsg.NewPtrFindCoordinatorRequest()
		f.Version, f.CoordinatorKey = 2, group
		resp := kmsg.NewPtrFindCoordinatorResponse()
		g.do(f, resp)
		if resp.ErrorCode == 0 {
			return
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("FindCoordinator %s: %v", group, kerr.ErrorForCode(resp.ErrorCode))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// members returns the member ids of group.
func (g *rawGroup) members(group string) []string {
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version = 4
	d.Groups = []string{group}
	resp := kmsg.NewPtrDescribeGroupsResponse()
	// A coordinator still loading the group (a restarted node elects its
	// __consumer_offsets leader after it registers) answers with a
	// retriable error and no members: asked again, as a client does.
	deadline := time.Now().Add(90 * time.Second)
	for {
		g.do(d, resp)
		code := resp.Groups[0].ErrorCode
		if code == 0 {
			break
		}
		if err := kerr.ErrorForCode(code); !kerr.IsRetriable(err) || time.Now().After(deadline) {
			g.t.Fatalf("DescribeGroups %s: %v", group, err)
		}
		time.Sleep(100 * time.Millisecond)
		resp = kmsg.NewPtrDescribeGroupsResponse()
	}
	var ids []string
	for _, m := range resp.Groups[0].Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}

// TestGroupWritesOnFullDisk: on a full disk the group metadata record of a
// static member's rejoin cannot be stored: the broker answers
// NOT_COORDINATOR (it used to answer success and keep a group nothing
// stored), the group it shows is the one a restart loads, and once there
// is room the rejoin succeeds.
func TestGroupWritesOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	small := []string{"--offsets.topic.num.partitions", "1", "--transaction.state.log.num.partitions", "1"}
	p := startOnSmallDisk(t, dir, 8<<20, small...)
	started := len(p.Lines()) // the broker has room from here
	g := dialGroup(t, p.Kafka)
	// A cluster creates __consumer_offsets at the first FindCoordinator
	// and leads it once the metadata says so: wait for that first.
	g.waitCoordinator("full-g")
	inst := "i1"
	j := g.staticJoin("full-g", inst)
	if j.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(j.ErrorCode))
	}
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version, s.Group, s.MemberID, s.Generation, s.InstanceID = 3, "full-g", j.MemberID, j.Generation, &inst
	a := kmsg.NewSyncGroupRequestGroupAssignment()
	a.MemberID, a.MemberAssignment = j.MemberID, []byte{}
	s.GroupAssignment = append(s.GroupAssignment, a)
	sr := kmsg.NewPtrSyncGroupResponse()
	if g.do(s, sr); sr.ErrorCode != 0 {
		t.Fatalf("sync: %v", kerr.ErrorForCode(sr.ErrorCode))
	}
	fillDisk(t, dir)
	// The broker measures its free space every second: wait until it saw
	// the disk full (it logs that once until there is room again).
	waitLine(t, p, started, reserveLowMsg)

	// The static member restarts: its new member id cannot be stored.
	if j2 := g.staticJoin("full-g", inst); j2.ErrorCode != kerr.NotCoordinator.Code {
		t.Errorf("static rejoin on a full disk: error %d (%v) member %s, want NOT_COORDINATOR", j2.ErrorCode, kerr.ErrorForCode(j2.ErrorCode), j2.MemberID)
	}
	if ids := g.members("full-g"); len(ids) != 1 || ids[0] != j.MemberID {
		t.Errorf("after the failed rejoin the broker shows members %v, the store holds [%s]", ids, j.MemberID)
	}
	// A restart (still on the full disk) loads the same group.
	p.Kill()
	p = startBroker(t, dir, small...)
	g = dialGroup(t, p.Kafka)
	g.waitCoordinator("full-g")
	if ids := g.members("full-g"); len(ids) != 1 || ids[0] != j.MemberID {
		t.Errorf("after a restart: members %v, want [%s]", ids, j.MemberID)
	}
	// Room again: the rejoin is stored.
	removeFiller(t, dir)
	// The restart's metadata store preallocated a WAL segment in the
	// reserve: make real room above it.
	resizeTmpfs(t, dir, 64<<20)
	// The broker sees the room at its next measure (at most a second
	// later): the member retries as a client would.
	var j3 *kmsg.JoinGroupResponse
	deadline := time.Now().Add(60 * time.Second)
	for {
		j3 = g.staticJoin("full-g", inst)
		if j3.ErrorCode == 0 {
			break
		}
		if j3.ErrorCode != kerr.NotCoordinator.Code || time.Now().After(deadline) {
			t.Fatalf("rejoin with room: %v", kerr.ErrorForCode(j3.ErrorCode))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ids := g.members("full-g"); len(ids) != 1 || ids[0] != j3.MemberID {
		t.Errorf("after the rejoin: members %v, want [%s]", ids, j3.MemberID)
	}
}

// reserveLowMsg is logged when a log dir's free space is found below its
// reserve (strata.log.min.free.bytes).
const reserveLowMsg = "log dir is below its free-space reserve"

// reserveResumeMsg is logged when a log dir found below its reserve has
// room above it again.
const reserveResumeMsg = "log dir has room above its free-space reserve again"

// waitLine waits until p has logged a line containing s, after its
// first from lines (len(p.Lines()) before what should make p log it).
func waitLine(t *testing.T, p *proc, from int, s string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, l := range p.Lines()[from:] {
			if strings.Contains(l, s) {
				return
			}
		}
		if time.Now().After(deadline) || !p.Alive() {
			t.Fatalf("strata did not log %q:\n%s", s, p.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fillDisk takes every free byte above the free-space reserve of the file
// system holding dir with a hidden filler file, and a little of the
// reserve: the data plane then finds the disk full, the metadata store
// still has room.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	_, free := diskUsage(t, dir)
	n := free - reserveBytes + 64<<10
	if n <= 0 {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, ".filler"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("filler: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for n > 0 {
		w := min(n, int64(len(chunk)))
		if _, err := f.Write(chunk[:w]); err != nil {
			t.Fatalf("filler: %v", err)
		}
		n -= w
	}
	_, free = diskUsage(t, dir)
	t.Logf("disk filled to the reserve: %d bytes free", free)
}

// removeFiller frees what fillDisk took. fillDisk takes nothing when the
// data plane has already written the disk down to its reserve, so a
// missing filler is not an error.
func removeFiller(t *testing.T, dir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, ".filler")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// fillDiskCompletely takes every free byte of the file system holding dir
// with the file name (a failed write may leave some room behind).
func fillDiskCompletely(t *testing.T, dir, name string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("filler: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for n := len(chunk); n > 0; n /= 2 {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
	if _, free := diskUsage(t, dir); free > 0 {
		t.Logf("disk filled: %d bytes still free", free)
	}
}
