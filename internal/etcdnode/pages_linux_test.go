//go:build linux

package etcdnode

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// mappedRss returns the resident bytes of this process's mappings of
// file path (/proc/self/smaps).
func mappedRss(t *testing.T, path string) int64 {
	t.Helper()
	path, _ = filepath.EvalSymlinks(path)
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var rss int64
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = strings.HasSuffix(l, " "+path)
			continue
		}
		if in && len(f) >= 2 && f[0] == "Rss:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			rss += kb << 10
		}
	}
	return rss
}

// TestReleaseBackendPages: etcd maps its backend with MAP_POPULATE, so the
// whole file (data and the 16 MiB bbolt grows it by) is resident after a
// start; ReleaseBackendPages gives those pages back, and every key reads
// the same afterwards (the pages come back from the file).
func TestReleaseBackendPages(t *testing.T) {
	dir := t.TempDir()
	ln, v := listen(t)
	v.ID = 1
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := Config{NodeID: 1, Dir: dir, Listener: ln, Voters: []Voter{v}, ClusterToken: "rp", Logger: quiet()}
	n, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cli := client(t, n.ClientEndpoint())
	val := strings.Repeat("v", 1000)
	for i := range 2000 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%04d", i), val+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	n.Close()
	ln, err = net.Listen("tcp", v.Addr())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listener = ln
	if n, err = Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	db := n.e.Server.Cfg.BackendPath()
	before := mappedRss(t, db)
	advised, err := releaseMapped(db)
	after := mappedRss(t, db)
	t.Logf("backend map resident: %d KiB after the start, %d KiB after the release (%d KiB advised, err %v)", before>>10, after>>10, advised>>10, err)
	if err == nil && (advised == 0 || after > before/2) {
		t.Errorf("release left %d of %d bytes resident", after, before)
	}
	cli = client(t, n.ClientEndpoint())
	r, err := cli.Get(ctx, "k", clientv3.WithPrefix())
	if err != nil || len(r.Kvs) != 2000 {
		t.Fatalf("after the release: %d keys, %v", len(r.Kvs), err)
	}
	for i, kv := range r.Kvs {
		if string(kv.Value) != val+strconv.Itoa(i) {
			t.Fatalf("key %s reads %.20q after the release", kv.Key, kv.Value)
		}
	}
}
