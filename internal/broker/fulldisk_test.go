package broker

import (
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-io/strata/internal/vfs"
)

// TestRestartOnFullDiskAfterCrash: the broker opens after a crash on a
// disk that has no room at all (every write of bytes fails with ENOSPC),
// whatever moment the crash came at: while topics are created, appended
// to across segment rolls, given partitions and deleted. Every record that
// was durable before the crash is served. (test/e2e's TestDiskFull does
// the same with the real binary on a full tmpfs, for one moment.)
func TestRestartOnFullDiskAfterCrash(t *testing.T) {
	fsys := vfs.NewCrashFS()
	cfg := testConfig(t, crashLogDir, "log.index.size.max.bytes", "4096", "log.segment.bytes", "1024")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := OpenFS(cfg, logger, fsys)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	full := func(op, name string) error {
		if op == "write" || op == "truncate" && strings.HasSuffix(name, ".tmp") {
			return syscall.ENOSPC
		}
		return nil
	}
	images := 0
	check := func(step string, want map[string]int) {
		t.Helper()
		img := fsys.Crash()
		img.SetHook(full)
		nb, err := OpenFS(testConfig(t, crashLogDir, "log.index.size.max.bytes", "4096", "log.segment.bytes", "1024"), logger, img)
		if err != nil {
			t.Fatalf("%s: the broker does not open on a full disk after a crash: %v", step, err)
		}
		defer nb.Close()
		for tp, n := range want {
			topic, p := tp[:len(tp)-2], int32(tp[len(tp)-1]-'0')
			if got := records(t, nb, topic, p); got < n {
				t.Fatalf("%s: %s has %d records after the crash, want at least %d", step, tp, got, n)
			}
		}
		images++
	}
	want := map[string]int{}
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "a", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	check("created", want)
	for i := 0; i < 12; i++ { // several segment rolls per partition
		p := int32(i % 2)
		// A crash before every file-system operation of the append (the
		// roll's new files, index and snapshot writes, fsyncs).
		var cuts []*vfs.CrashFS
		fsys.SetHook(func(op, name string) error {
			cuts = append(cuts, fsys.Crash())
			return nil
		})
		appendOne(t, b, "a", p, 5)
		fsys.SetHook(nil)
		for k, img := range cuts {
			img.SetHook(full)
			nb, err := OpenFS(testConfig(t, crashLogDir, "log.index.size.max.bytes", "4096", "log.segment.bytes", "1024"), logger, img)
			if err != nil {
				t.Fatalf("append %d, crash before operation %d: the broker does not open on a full disk: %v", i, k, err)
			}
			for tp, n := range want {
				if got := records(t, nb, tp[:1], int32(tp[2]-'0')); got < n {
					t.Fatalf("append %d, crash before operation %d: %s has %d records, want at least %d", i, k, tp, got, n)
				}
			}
			nb.Close()
			images++
		}
		want["a-"+string(rune('0'+p))] += 5
		check("append", want)
	}
	if err := b.CreatePartitions("a", 3, false); err != nil {
		t.Fatal(err)
	}
	check("partitions added", want)
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "gone", NumPartitions: 2, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	appendOne(t, b, "gone", 0, 3)
	check("second topic", want)
	if err := b.DeleteTopic("gone"); err != nil {
		t.Fatal(err)
	}
	check("topic deleted", want)
	if images == 0 {
		t.Fatal("no crash image checked")
	}
}
