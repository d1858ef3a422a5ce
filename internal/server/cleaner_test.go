package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOneCleanerForAllLogDirs compacts a topic whose partitions are spread
// over two log dirs with the broker's single cleaner: /v1/compaction shows
// and runs every partition, and each dir's cleaner-offset-checkpoint lists
// exactly the partitions it holds.
func TestOneCleanerForAllLogDirs(t *testing.T) {
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "a"), filepath.Join(root, "b")
	logs := &syncBuffer{}
	tb := startBrokerLog(t, dirA, map[string]string{
		"log.dirs":                dirA + "," + dirB,
		"strata.metrics.listener": "127.0.0.1:0",
	}, logs)
	ctx := ctxT(t)
	const parts = 4
	compact, seg := "compact", "1024"
	if _, err := tb.Admin().CreateTopic(ctx, parts, 1, map[string]*string{"cleanup.policy": &compact, "segment.bytes": &seg}, "c"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("c"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(900))
	var recs []*kgo.Record
	for p := int32(0); p < parts; p++ {
		for i := 0; i < 200; i++ {
			recs = append(recs, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("k%d", i%5)), Value: []byte(strings.Repeat("v", 40))})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	resp, err := http.Post("http://"+tb.Server().MetricsAddr().String()+"/v1/compaction/run?topic=c", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/compaction/run: %d %s", resp.StatusCode, body)
	}
	var st []struct {
		Partition      int32 `json:"partition"`
		FirstDirty     int64 `json:"first_dirty_offset"`
		RecordsRemoved int64 `json:"total_records_removed"`
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if len(st) != parts {
		t.Fatalf("status of %d partitions, want %d: %s", len(st), parts, body)
	}
	for _, s := range st {
		if s.FirstDirty <= 0 || s.RecordsRemoved == 0 {
			t.Errorf("partition %d not cleaned: %+v", s.Partition, s)
		}
	}

	// The cleaner's JSON log lines carry "component" once.
	cleaned := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"cleaned log"`) {
			cleaned++
			if n := strings.Count(line, `"component"`); n != 1 {
				t.Errorf("log line has \"component\" %d times: %s", n, line)
			}
		}
	}
	if cleaned < parts { // the background passes may clean too
		t.Errorf("%d \"cleaned log\" lines, want at least %d", cleaned, parts)
	}

	// Each dir's checkpoint lists exactly the partitions that dir holds.
	want := map[string][]string{}
	for _, p := range tb.Server().Broker().Topic("c").Partitions {
		want[p.BaseDir()] = append(want[p.BaseDir()], fmt.Sprintf("c %d ", p.Index))
	}
	if len(want) != 2 {
		t.Fatalf("partitions not spread over both dirs: %v", want)
	}
	for dir, prefixes := range want {
		b, err := os.ReadFile(filepath.Join(dir, "cleaner-offset-checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n")[2:] {
			if strings.HasPrefix(line, "c ") {
				got = append(got, line)
			}
		}
		if len(got) != len(prefixes) {
			t.Fatalf("%s checkpoint %q, want partitions %q", dir, b, prefixes)
		}
		for i, pre := range prefixes {
			if !strings.HasPrefix(got[i], pre) {
				t.Errorf("%s checkpoint %q, want partitions %q", dir, b, prefixes)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
