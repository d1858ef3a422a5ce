package server_test

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/server"
	"github.com/strata-io/strata/internal/servertest"
)

// TestEarlyMemberWaitsForTheDirLock: New starts the metadata store member
// while the logs load (issue 18, member_start.go), but only once the
// broker holds the lock of its log directories. A second node on a
// running node's directories fails on that lock, and the running node's
// store is untouched (it still creates topics); a node built by New and
// shut down without Start stops its member, so the directories serve the
// next node (twice, then the first node again with its topic).
func TestEarlyMemberWaitsForTheDirLock(t *testing.T) {
	dir := t.TempDir()
	b := servertest.Start(t, servertest.Options{Dir: dir, OneNodeCluster: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	settings := maps.Clone(servertest.TestDefaults)
	settings["log.dirs"] = dir
	newNode := func() (*server.Server, error) {
		cfg, err := config.LoadBroker("", nil, settings)
		if err != nil {
			t.Fatal(err)
		}
		return server.NewWithOptions(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)),
			server.Options{OneNodeCluster: true, StoreTiming: servertest.StoreTiming})
	}
	if srv, err := newNode(); err == nil {
		srv.Shutdown(ctx)
		t.Fatal("a second node opened a running node's log directories")
	} else if !strings.Contains(err.Error(), "is another broker using it?") {
		t.Fatalf("second node on the same directories: %v, want the log dir lock's error", err)
	}
	if r, err := b.Admin().CreateTopic(ctx, 3, 1, nil, "after"); err != nil || r.Err != nil {
		t.Fatalf("create a topic after the second node failed: %v %v", err, r.Err)
	}
	b.Close()
	for i := range 2 {
		srv, err := newNode()
		if err != nil {
			t.Fatalf("New %d on the stopped node's directories: %v", i+1, err)
		}
		if err := srv.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown %d without Start: %v", i+1, err)
		}
	}
	b.Open()
	td, err := b.Admin().ListTopics(ctx, "after")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := td["after"]; !ok || d.Err != nil || len(d.Partitions) != 3 {
		t.Fatalf("topic after the restarts: %+v", td)
	}
}
