package etcdnode

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestStartOnFullDisk: a member whose file system cannot hold its first
// write-ahead log segments is refused with a message that says what to
// do, instead of etcd panicking in its WAL preallocation.
func TestStartOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs (the test needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	ln, v := listen(t)
	v.ID = 1
	_, err := Start(context.Background(), Config{NodeID: 1, Dir: dir, Listener: ln, Voters: []Voter{v}, ClusterToken: "t", Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "needs 144 MB free to start") || !strings.Contains(err.Error(), "metadata.log.dir") {
		t.Fatalf("start on a 32 MB file system: %v, want a refusal naming the space needed and metadata.log.dir", err)
	}
	t.Log(err)
}

// TestNoSpaceAlarmRecovery fills a member's backend to its quota: puts
// then fail with etcd's "database space exceeded" (which the metadata
// layer answers retriably); once the data is deleted the member compacts,
// defragments and disarms its alarm by itself, and puts succeed again.
func TestNoSpaceAlarmRecovery(t *testing.T) {
	dir := t.TempDir()
	ln, v := listen(t)
	v.ID = 1
	n, err := Start(context.Background(), Config{NodeID: 1, Dir: dir, Listener: ln, Voters: []Voter{v}, ClusterToken: "t",
		QuotaBackendBytes: 4 << 20, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := client(t, n.ClientEndpoint())
	val := strings.Repeat("x", 100<<10)
	full := false
	for i := 0; i < 200 && !full; i++ {
		_, err := cli.Put(ctx, fmt.Sprintf("k%03d", i), val)
		switch {
		case errors.Is(err, rpctypes.ErrNoSpace):
			full = true
		case err != nil:
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if !full {
		t.Fatal("20 MB written under a 4 MiB quota without a NOSPACE refusal")
	}
	if _, err := cli.Delete(ctx, "k", clientv3WithPrefix()...); err != nil {
		t.Fatalf("delete under the NOSPACE alarm: %v", err)
	}
	for {
		_, err := cli.Put(ctx, "after", "v")
		if err == nil {
			break
		}
		if !errors.Is(err, rpctypes.ErrNoSpace) {
			t.Fatalf("put while the alarm should clear: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("NOSPACE alarm not cleared by the member: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if n.hasNoSpaceAlarm() {
		t.Error("alarm still listed after a put succeeded")
	}
}

func clientv3WithPrefix() []clientv3.OpOption { return []clientv3.OpOption{clientv3.WithPrefix()} }
