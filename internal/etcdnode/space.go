package etcdnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"
)

// startSpace is the free space a member needs to start: etcd preallocates
// its WAL segments (wal.SegmentSizeBytes) with fallocate and panics when
// it cannot. A new member creates its first segment and one ahead
// (filePipeline); a restarted one reuses its last segment and preallocates
// one ahead. Both also need room for the backend's first pages.
func startSpace(dir string) int64 {
	const backend = 16 << 20
	if hasData(dir) {
		return walSegmentBytes + backend
	}
	return 2*walSegmentBytes + backend
}

// checkStartSpace refuses, with a message that says what to do, to start a
// member whose file system cannot hold what etcd writes at its start (a
// full disk would otherwise make etcd panic).
func checkStartSpace(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil // not measurable: etcd reports its own errors
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	need := startSpace(dir)
	if wal := filepath.Join(dir, "member", "wal"); hasData(dir) {
		// A segment already preallocated ahead (0.tmp or 1.tmp) is
		// truncated and allocated again: its space counts as free.
		for _, name := range []string{"0.tmp", "1.tmp"} {
			if fi, err := os.Stat(filepath.Join(wal, name)); err == nil {
				free += fi.Size()
				break
			}
		}
	}
	if free >= need {
		return nil
	}
	return fmt.Errorf("the metadata store in %s needs %d MB free to start (etcd preallocates %d MB write-ahead log segments) and its file system has %d MB: free space on it, or put the store on another disk with metadata.log.dir",
		dir, need/1000000, walSegmentBytes/1000000, free/1000000)
}

// spaceCheckInterval is how often the member looks for its NOSPACE alarm
// (a local read, no network call).
const spaceCheckInterval = 2 * time.Second

// spaceLoop recovers from etcd's NOSPACE alarm, raised when the backend
// reached its quota (Config.QuotaBackendBytes): metadata writes fail
// (retriably) while it is set. The member compacts the history away,
// defragments its backend and disarms its alarm once the live data fits
// in half the quota again, etcd's documented recovery ("Space quota" in
// etcd's maintenance guide). A member whose live data alone exceeds that
// keeps the alarm and says so.
func (n *Node) spaceLoop() {
	defer n.wg.Done()
	t := time.NewTicker(spaceCheckInterval)
	defer t.Stop()
	logged := false
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if !n.hasNoSpaceAlarm() {
			logged = false
			continue
		}
		if !logged {
			n.logger.Error("metadata store reached its size quota: metadata changes are refused (retriably) until it is compacted and defragmented",
				"quota_bytes", n.cfg.QuotaBackendBytes, "db_bytes", n.e.Server.Backend().Size())
			logged = true
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := n.recoverSpace(ctx)
		cancel()
		if err != nil {
			n.logger.Warn("metadata store quota recovery", "err", err)
		}
	}
}

// hasNoSpaceAlarm reports whether this member's NOSPACE alarm is set.
func (n *Node) hasNoSpaceAlarm() bool {
	for _, a := range n.e.Server.Alarms() {
		if a.Alarm == pb.AlarmType_NOSPACE && a.MemberID == n.MemberID() {
			return true
		}
	}
	return false
}

// recoverSpace compacts to the current revision, defragments this member
// and disarms its NOSPACE alarm when the live data fits in half the quota.
func (n *Node) recoverSpace(ctx context.Context) error {
	cli, err := n.localClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, "\x00", clientv3.WithSerializable(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("read the current revision: %w", err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil &&
		!strings.Contains(err.Error(), "required revision has been compacted") {
		return fmt.Errorf("compact to revision %d: %w", resp.Header.Revision, err)
	}
	if _, err := cli.Defragment(ctx, n.ClientEndpoint()); err != nil {
		return fmt.Errorf("defragment: %w", err)
	}
	be := n.e.Server.Backend()
	if inUse := be.SizeInUse(); inUse*2 > n.cfg.QuotaBackendBytes {
		return errors.New("the live metadata alone fills more than half the store's quota: alarm kept (delete topics, or raise the quota)")
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: n.MemberID(), Alarm: pb.AlarmType_NOSPACE}); err != nil {
		return fmt.Errorf("disarm: %w", err)
	}
	n.logger.Info("metadata store compacted and defragmented below its quota: metadata changes accepted again",
		"db_bytes", be.Size(), "in_use_bytes", be.SizeInUse())
	return nil
}
