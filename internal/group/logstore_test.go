package group

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/storage"
	"github.com/strata-io/strata/internal/vfs"
)

// logStore is a Storage over real storage.Logs in a temp dir, as the server
// wires it (append, then wait for the fsync).
type logStore struct {
	logs   []*storage.Log
	syncer *storage.Syncer
}

func openLogStore(t *testing.T, dir string, n int) *logStore {
	t.Helper()
	s := &logStore{syncer: storage.NewSyncer(nil)}
	cfg := storage.DefaultConfig()
	cfg.Compact, cfg.Delete = true, false
	for p := 0; p < n; p++ {
		l, err := storage.Open(filepath.Join(dir, fmt.Sprintf("__consumer_offsets-%d", p)), [16]byte{9}, cfg, true,
			storage.Options{FS: vfs.Default(), Syncer: s.syncer})
		if err != nil {
			t.Fatal(err)
		}
		s.logs = append(s.logs, l)
	}
	return s
}

func (s *logStore) Append(p int32, batch []byte) (func(context.Context) error, error) {
	return s.append(p, batch, storage.AppendOptions{RequireKeys: true})
}

func (s *logStore) AppendTxn(p int32, batch []byte) (func(context.Context) error, error) {
	return s.append(p, batch, storage.AppendOptions{RequireKeys: true, Coordinator: true})
}

func (s *logStore) append(p int32, batch []byte, opts storage.AppendOptions) (func(context.Context) error, error) {
	l := s.logs[p]
	res, err := l.Append(batch, opts)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return l.WaitDurable(ctx, res.LastOffset+1) }, nil
}

// marker appends a transaction marker to partition p and waits for it to be
// durable, as the broker's WriteMarkers does.
func (s *logStore) marker(p int32, pid int64, epoch int16, commit bool) error {
	off, err := s.logs[p].AppendMarker(pid, epoch, 0, commit, 0)
	if err != nil {
		return err
	}
	return s.logs[p].WaitDurable(context.Background(), off+1)
}

func (s *logStore) Log(p int32) *storage.Log { return s.logs[p] }

func (s *logStore) close(t *testing.T) {
	for _, l := range s.logs {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s.syncer.Close()
}

// TestReplayFromStorageLog persists through real partition logs and
// replays them with Log.Read (the path the server uses).
func TestReplayFromStorageLog(t *testing.T) {
	dir := t.TempDir()
	clk := newFakeClock()
	cfg := testConfig(clk)
	cfg.NumPartitions = 3
	st := openLogStore(t, dir, 3)
	c, err := NewCoordinator(cfg, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, c: c, clk: clk, cfg: cfg}
	for i := 0; i < 50; i++ {
		for _, g := range []string{"a", "b", "c", "d"} {
			h.do(commitReq(g, "", -1, "t", map[int32]int64{int32(i % 3): int64(i)}))
		}
	}
	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Groups = []string{"d"}
	if d := h.do(dr).(*kmsg.DeleteGroupsResponse); d.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %d", d.Groups[0].ErrorCode)
	}
	c.Close()
	st.close(t)

	st = openLogStore(t, dir, 3)
	defer st.close(t)
	c, err = NewCoordinator(cfg, st, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.c = c
	for _, g := range []string{"a", "b", "c"} {
		got := h.fetch(g, "")
		if got["t"][0] != 48 || got["t"][1] != 49 || got["t"][2] != 47 {
			t.Fatalf("%s after replay: %v", g, got)
		}
	}
	if c.lookup("d") != nil {
		t.Fatal("deleted group replayed")
	}
}
