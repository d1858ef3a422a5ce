package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// activeSegment returns the path of the .log file with the highest base
// offset in a partition directory.
func activeSegment(t *testing.T, partDir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(partDir, "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no segments in %s: %v", partDir, err)
	}
	sort.Strings(logs) // 20-digit zero-padded names sort by base offset
	return logs[len(logs)-1]
}

// TestTornTail SIGKILLs the broker, appends what a torn or corrupt write
// leaves at the end of the active segment, restarts it, and checks recovery
// cuts exactly the junk: every acknowledged record intact, no garbage
// served, and new appends continue at the right offset.
func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	p := startBroker(t, dir)
	ctx := ctxFor(t, 2*time.Minute)
	seg := "16384"
	if res, err := newAdmin(t, p.Kafka).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &seg}, "torn"); err != nil || res.Err != nil {
		t.Fatalf("create torn: %v %v", err, res.Err)
	}
	next := 0
	produce := func(count int) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka), kgo.DefaultProduceTopic("torn"), kgo.ProducerBatchMaxBytes(8<<10))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var rs []*kgo.Record
		for i := 0; i < count; i++ {
			rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprintf("n%09d", next+i)), Value: payload(next + i)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		next += count
	}
	verify := func(what string) {
		t.Helper()
		got := readAll(t, ctx, p.Kafka, "torn")[0]
		if len(got) != next {
			t.Errorf("%s: %d records stored, want %d", what, len(got), next)
		}
		for i, r := range got {
			if r.offset != int64(i) || !bytes.Equal(r.value, payload(i)) || string(r.key) != fmt.Sprintf("n%09d", i) {
				t.Fatalf("%s: offset %d holds %.12q at offset %d, want record %d", what, i, r.value, r.offset, i)
			}
		}
	}
	produce(300)

	// What a crash can leave after the last whole batch.
	partial := buildBatch([][]byte{payload(1 << 20), payload(1<<20 + 1)})
	badCRC := append([]byte(nil), partial...)
	badCRC[len(badCRC)-1] ^= 0xff
	hugeLen := make([]byte, 61)
	binary.BigEndian.PutUint32(hugeLen[8:], 1<<30)
	hugeLen[16] = 2
	junk := map[string][]byte{
		"zeros (preallocated tail)": make([]byte, 4096),
		"half a batch":              partial[:len(partial)/2],
		"whole batch with bad CRC":  badCRC,
		"header claiming 1 GiB":     hugeLen,
		"random bytes":              payload(7)[11:],
	}
	names := make([]string, 0, len(junk))
	for n := range junk {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		p.Kill()
		seg := activeSegment(t, filepath.Join(dir, "torn-0"))
		f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(junk[name]); err != nil {
			t.Fatal(err)
		}
		f.Close()
		p = startBroker(t, dir)
		verify("after " + name)
		produce(50)
		verify("appending after " + name)
		if t.Failed() {
			t.Fatalf("stopping after %s", name)
		}
	}
}
