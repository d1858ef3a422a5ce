package cleaner

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, CheckpointFile)
	got, err := readCheckpoint(path)
	if err != nil || len(got) != 0 {
		t.Fatalf("missing file: %v %v", got, err)
	}
	want := map[tp]int64{{"b", 1}: 7, {"a", 0}: 42, {"a", 10}: 0}
	if err := writeCheckpoint(path, want); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "0\n3\na 0 42\na 10 0\nb 1 7\n" {
		t.Fatalf("file = %q", data)
	}
	got, err = readCheckpoint(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read %v %v", got, err)
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Fatal("tmp file left behind")
	}
}

func TestCheckpointMalformed(t *testing.T) {
	for _, s := range []string{"", "1\n0\n", "0\n", "0\n2\na 0 1\n", "0\n1\na x 1\n", "0\n1\na 0\n", "0\n-1\n"} {
		if _, err := parseCheckpoint([]byte(s)); err == nil {
			t.Errorf("%q: want error", s)
		}
	}
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add([]byte("0\n1\ntopic 0 5\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n2\na 1 2\nb 3 4\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseCheckpoint(data)
		if err != nil {
			return
		}
		m2, err := parseCheckpoint(formatCheckpoint(m))
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip: %v %v", m2, err)
		}
	})
}
