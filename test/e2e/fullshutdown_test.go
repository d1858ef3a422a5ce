package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestShutdownOnFullDisk fills a tmpfs, stops the broker with SIGTERM while
// the disk is still full (checkpoints and the clean-shutdown marker may not
// fit), starts it again on the full disk and checks every acknowledged
// record.
func TestShutdownOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	p := startOnSmallDisk(t, dir, 4<<20)
	ctx := ctxFor(t, 2*time.Minute)
	seg := "1048576"
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &seg}, "fill"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	acked := map[int64][]byte{}
	var refused int16
	for i := 0; i < 4*fillRequests && refused == 0; i++ {
		v := bigValue(i)
		code, base, err := rawProduce(ctx, cl, "fill", 0, [][]byte{v})
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
		if refused = code; code == 0 {
			acked[base] = v
		}
	}
	if refused != kerr.KafkaStorageError.Code {
		t.Fatalf("filling 4 MiB of room ended with error %d (%v), want KAFKA_STORAGE_ERROR", refused, kerr.ErrorForCode(refused))
	}
	code := p.Term()
	_, markerErr := os.Stat(filepath.Join(dir, cleanMarker))
	t.Logf("SIGTERM on a full disk: exit code %d, clean shutdown marker written: %v", code, markerErr == nil)
	if code != 0 && markerErr == nil {
		t.Errorf("exit code %d but the clean shutdown marker was written (a failed shutdown must not claim to be clean)", code)
	}
	if os.Getenv("E2E_DEBUG") != "" {
		ents, _ := os.ReadDir(filepath.Join(dir, "fill-0"))
		for _, e := range ents {
			info, _ := e.Info()
			t.Logf("after the failed shutdown: %s %d bytes", e.Name(), info.Size())
		}
	}
	p, err = tryStartBroker(t, dir)
	if err != nil {
		t.Fatalf("restart after SIGTERM on the full disk: %v", err)
	}
	got := readAll(t, ctx, p.Kafka, "fill")[0]
	if len(got) != len(acked) {
		t.Errorf("%d records after restart, want the %d acknowledged", len(got), len(acked))
	}
	for _, r := range got {
		if w, ok := acked[r.offset]; !ok || !bytes.Equal(w, r.value) {
			t.Errorf("offset %d: not the acknowledged record", r.offset)
		}
	}
}
