package e2e

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDiskFullRawENOSPC runs the data plane into the file system's real
// end (ENOSPC), not the free-space reserve: the log dir is a 16 MiB tmpfs
// with strata.log.min.free.bytes 0 and the metadata store on another disk
// (metadata.log.dir). The refusal must be KAFKA_STORAGE_ERROR, the broker
// stays up, every acknowledged record reads back byte for byte and nothing
// unacknowledged appears, produce works again once there is room, and a
// restart keeps it all.
func TestDiskFullRawENOSPC(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, "16m")
	flags := []string{"--strata.log.min.free.bytes", "0", "--metadata.log.dir", filepath.Join(t.TempDir(), "meta")}
	p := startBroker(t, dir, flags...)
	ctx := ctxFor(t, 2*time.Minute)
	seg := "1048576"
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &seg}, "fill"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	cl := newClient(t, kgo.SeedBrokers(p.Kafka))
	acked := map[int64][]byte{}
	next := 0
	produce := func() (int16, error) {
		vals := [][]byte{bigValue(next), bigValue(next + 1), bigValue(next + 2), bigValue(next + 3)}
		code, base, err := rawProduce(ctx, cl, "fill", 0, vals)
		if err == nil && code == 0 {
			for j, v := range vals {
				acked[base+int64(j)] = v
			}
		}
		next += 4
		return code, err
	}
	var code int16
	for i := 0; i < 400 && code == 0; i++ { // 400 x 128 KiB: three times the disk
		c, err := produce()
		if err != nil {
			t.Fatalf("produce request %d: %v (broker alive: %v)", i, err, p.Alive())
		}
		code = c
	}
	t.Logf("ENOSPC after %d acknowledged records (%d KiB): produce error %d %v", len(acked), len(acked)*32, code, kerr.ErrorForCode(code))
	if code != kerr.KafkaStorageError.Code {
		t.Fatalf("filling a 16 MiB disk ended with error %d (%v), want KAFKA_STORAGE_ERROR", code, kerr.ErrorForCode(code))
	}
	if !p.Alive() {
		t.Fatalf("broker died on ENOSPC:\n%s", p.Log())
	}
	check := func(what string) {
		t.Helper()
		got := readAll(t, ctx, p.Kafka, "fill")[0]
		seen := 0
		for _, r := range got {
			w, ok := acked[r.offset]
			if !ok {
				t.Errorf("%s: offset %d holds a record that was never acknowledged (%.10q)", what, r.offset, r.value)
				continue
			}
			if !bytes.Equal(r.value, w) {
				t.Errorf("%s: offset %d: value differs from what was acknowledged", what, r.offset)
			}
			seen++
		}
		if seen != len(acked) {
			t.Errorf("%s: %d of %d acknowledged records read back", what, seen, len(acked))
		}
	}
	check("ENOSPC")

	// Room again: produce succeeds (bounded polling: the broker may need
	// a moment to see the space).
	resizeTmpfs(t, dir, 64<<20-reserveBytes)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := produce()
		if err != nil {
			t.Fatalf("produce with room: %v", err)
		}
		if c == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("produce still fails with %d %v 60 s after the disk has room", c, kerr.ErrorForCode(c))
		}
		time.Sleep(200 * time.Millisecond)
	}
	check("with room")
	cl.Close()
	if c := p.Term(); c != 0 {
		t.Errorf("exit code after SIGTERM = %d", c)
	}
	p = startBroker(t, dir, flags...)
	check("after restart")
}
