package logtool

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
)

func mustVerify(t *testing.T, dir string) *Report {
	t.Helper()
	rep, err := Verify(dir, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestVerifySound(t *testing.T) {
	root, _ := buildLogDir(t)
	var progress []int
	rep, err := Verify(root, VerifyOptions{Progress: func(done, total int) { progress = append(progress, done, total) }})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("problems in a sound log dir: %v", rep.Problems)
	}
	if rep.Partitions != 2 || rep.Segments != 3 || rep.Batches != 17 || rep.Records != 3+4+5+6+7+8+9+10+11+12+24 {
		t.Fatalf("report counts: %+v", rep)
	}
	if len(progress) != 4 || progress[2] != 2 || progress[3] != 2 {
		t.Fatalf("progress calls: %v", progress)
	}
}

func TestVerifyFlippedByte(t *testing.T) {
	root, active := buildLogDir(t)
	data, _ := os.ReadFile(active)
	data[100] ^= 0x40 // inside the first batch's records
	os.WriteFile(active, data, 0o644)
	rep := mustVerify(t, root)
	if len(rep.Problems) != 1 || rep.Problems[0].File != active || rep.Problems[0].Position != 0 ||
		!strings.Contains(rep.Problems[0].Reason, "CRC mismatch") {
		t.Fatalf("problems: %v", rep.Problems)
	}
}

func TestVerifyTornTail(t *testing.T) {
	root, active := buildLogDir(t)
	data, _ := os.ReadFile(active)
	size := len(data)
	os.WriteFile(active, append(data, data[:40]...), 0o644)
	rep := mustVerify(t, root)
	if len(rep.Problems) != 1 || rep.Problems[0].Position != int64(size) || !strings.Contains(rep.Problems[0].Reason, "torn tail") {
		t.Fatalf("problems: %v", rep.Problems)
	}
	// The same in a non-active segment is not a torn tail.
	first := filepath.Join(filepath.Dir(active), SegmentFileName(0, ExtLog))
	data, _ = os.ReadFile(first)
	os.WriteFile(first, data[:len(data)-3], 0o644)
	rep = mustVerify(t, root)
	found := false
	for _, p := range rep.Problems {
		found = found || p.File == first && strings.Contains(p.Reason, "non-active")
	}
	if !found {
		t.Fatalf("problems: %v", rep.Problems)
	}
}

func TestVerifyBadIndexes(t *testing.T) {
	root, active := buildLogDir(t)
	idx := strings.TrimSuffix(active, ExtLog) + ExtIndex
	data, _ := os.ReadFile(idx)
	binary.BigEndian.PutUint32(data[4:], binary.BigEndian.Uint32(data[4:])+1) // position off by one
	os.WriteFile(idx, data, 0o644)
	tidx := strings.TrimSuffix(active, ExtLog) + ExtTimeIndex
	data, _ = os.ReadFile(tidx)
	binary.BigEndian.PutUint64(data, 7) // timestamp no batch has
	os.WriteFile(tidx, data, 0o644)
	rep := mustVerify(t, root)
	if len(rep.Problems) != 2 || !strings.Contains(rep.Problems[0].Reason, "not the start of a batch") ||
		!strings.Contains(rep.Problems[1].Reason, "maxTimestamp") {
		t.Fatalf("problems: %v", rep.Problems)
	}
}

func TestVerifyOffsetsMustIncrease(t *testing.T) {
	root, active := buildLogDir(t)
	// Rename the active segment so its name base is above its first batch.
	dir := filepath.Dir(active)
	base, _, _ := ParseSegmentName(active)
	for _, ext := range []string{ExtLog, ExtIndex, ExtTimeIndex} {
		os.Rename(filepath.Join(dir, SegmentFileName(base, ext)), filepath.Join(dir, SegmentFileName(base+1, ext)))
	}
	rep := mustVerify(t, root)
	found := false
	for _, p := range rep.Problems {
		found = found || strings.Contains(p.Reason, "below the base offset")
	}
	if !found {
		t.Fatalf("problems: %v", rep.Problems)
	}
	// Duplicate the first segment's content into the second: offsets repeat.
	root, active = buildLogDir(t)
	first, _ := os.ReadFile(filepath.Join(filepath.Dir(active), SegmentFileName(0, ExtLog)))
	data, _ := os.ReadFile(active)
	os.WriteFile(active, append(data, first...), 0o644)
	rep = mustVerify(t, root)
	found = false
	for _, p := range rep.Problems {
		found = found || strings.Contains(p.Reason, "not above previous last offset")
	}
	if !found {
		t.Fatalf("problems: %v", rep.Problems)
	}
}

func TestDumpText(t *testing.T) {
	root, _ := buildLogDir(t)
	var out bytes.Buffer
	probs, err := Dump(&out, filepath.Join(root, "a-0"), DumpOptions{PrintRecords: true, VerifyIndex: true})
	if err != nil || len(probs) != 0 {
		t.Fatalf("Dump: %v %v", err, probs)
	}
	s := out.String()
	for _, want := range []string{
		"Dumping " + filepath.Join(root, "a-0", "00000000000000000000.log"),
		"baseOffset: 0 lastOffset: 2 count: 3 position: 0 ",
		"crcValid: true magic: 2 compression: none timestampType: CreateTime maxTimestamp: 1002",
		"compression: zstd",
		"| offset: 0 timestamp: 1000 key: null value: \"value-0\" headers: [\"h\"=null]",
		"| offset: 1 timestamp: 1001 key: \"k1\"",
		"count: 0 ", // the empty batch
		"offset: 82 position: 142\n",
		"Index check of 00000000000000000000.index: 0 problems",
		"timestamp: 1090 offset: ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("dump lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("dump output:\n%s", s)
	}
}

func TestDumpJSON(t *testing.T) {
	_, active := buildLogDir(t)
	data, _ := os.ReadFile(active)
	data[100] ^= 1
	os.WriteFile(active, data, 0o644)
	var out bytes.Buffer
	probs, err := Dump(&out, active, DumpOptions{PrintRecords: true, JSON: true})
	if err != nil || len(probs) != 1 {
		t.Fatalf("Dump: %v %v", err, probs)
	}
	types := map[string]int{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		types[m["type"].(string)]++
		if m["type"] == "batch" && m["position"].(float64) == 0 && m["crcValid"] != false {
			t.Fatalf("first batch should be CRC-invalid: %v", m)
		}
		if m["type"] == "record" && m["offset"].(float64) == 79 && m["key"] != nil {
			t.Fatalf("null key not null in JSON: %v", m)
		}
	}
	if types["file"] != 1 || types["batch"] != 7 || types["problem"] != 1 || types["record"] != 20 {
		t.Fatalf("line types: %v", types)
	}
}

func TestDumpVerifyIndexFindsMismatch(t *testing.T) {
	_, active := buildLogDir(t)
	idx := strings.TrimSuffix(active, ExtLog) + ExtIndex
	data, _ := os.ReadFile(idx)
	binary.BigEndian.PutUint32(data[0:], binary.BigEndian.Uint32(data[0:])-1) // offset not a batch's last
	os.WriteFile(idx, data, 0o644)
	var out bytes.Buffer
	probs, err := Dump(&out, idx, DumpOptions{VerifyIndex: true})
	if err != nil || len(probs) != 1 || !strings.Contains(probs[0].Reason, "below the last offset") {
		t.Fatalf("Dump: %v %v\n%s", err, probs, out.String())
	}
	if strings.Count(out.String(), "offset: ") < 1 || !strings.Contains(out.String(), "1 problems") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestParseNames(t *testing.T) {
	if b, ext, ok := ParseSegmentName("/x/00000000000000000042.timeindex"); !ok || b != 42 || ext != ExtTimeIndex {
		t.Fatalf("ParseSegmentName: %d %q %v", b, ext, ok)
	}
	for _, bad := range []string{"42.log", "00000000000000000042.log.deleted", "00000000000000000042.log.swap", "leader-epoch-checkpoint"} {
		if _, _, ok := ParseSegmentName(bad); ok {
			t.Errorf("ParseSegmentName(%q) accepted", bad)
		}
	}
	if SegmentFileName(42, ExtLog) != "00000000000000000042.log" {
		t.Fatal(SegmentFileName(42, ExtLog))
	}
	if topic, p, ok := ParsePartitionDir("my-topic-12"); !ok || topic != "my-topic" || p != 12 {
		t.Fatalf("ParsePartitionDir: %q %d %v", topic, p, ok)
	}
	for _, bad := range []string{"topic", "topic-1.abc-delete", "__cluster_metadata-x"} {
		if _, _, ok := ParsePartitionDir(bad); ok {
			t.Errorf("ParsePartitionDir(%q) accepted", bad)
		}
	}
}

func TestDumpControlBatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "txn-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := newSegWriter(t, dir, 0, 1<<20)
	w.appendBatch(2, record.None, 10)
	w.appendRaw(recordtest.Marker(record.BatchHeader{BaseOffset: 2, BaseTimestamp: 20, ProducerID: 5, ProducerEpoch: 1}, true, 4))
	logPath := w.write()
	var out bytes.Buffer
	if probs, err := Dump(&out, logPath, DumpOptions{PrintRecords: true}); err != nil || len(probs) != 0 {
		t.Fatalf("Dump: %v %v", err, probs)
	}
	if !strings.Contains(out.String(), "| offset: 2 timestamp: 20 control: COMMIT coordinatorEpoch: 4") ||
		!strings.Contains(out.String(), "isTransactional: true isControl: true") {
		t.Fatalf("output:\n%s", out.String())
	}
	if rep := mustVerify(t, filepath.Dir(dir)); !rep.OK() || rep.Partitions != 1 || rep.Records != 3 {
		t.Fatalf("problems: %v", rep.Problems)
	}
}
