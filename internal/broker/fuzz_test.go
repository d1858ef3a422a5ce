package broker

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/vfs"
)

// Fuzz targets for the broker's own files, read at every start: the topic
// metadata store (__strata_metadata.json), the SCRAM credential store
// (__strata_scram_credentials.json) and meta.properties. Whatever a file
// holds (a torn write, a bit flip, an edit by hand), opening the broker
// either fails with an error or opens a broker whose state is sound: no
// panic, no file outside the log directory, topics with legal names and
// partitions sorted by a unique, non-negative index.

const fuzzLogDir = "/data"

func fuzzConfig(f *testing.F) *config.Broker {
	cfg, err := config.LoadBroker("", nil, map[string]string{"log.dirs": fuzzLogDir, "log.index.size.max.bytes": "4096"})
	if err != nil {
		f.Fatal(err)
	}
	return cfg
}

// fuzzOpen opens a broker over a fresh CrashFS holding file name with
// content, checks what it loaded, uses it a little and closes it.
func fuzzOpen(t *testing.T, cfg *config.Broker, name string, content []byte) {
	fsys := vfs.NewCrashFS()
	if err := fsys.MkdirAll(fuzzLogDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(fsys, filepath.Join(fuzzLogDir, name), content, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := OpenFS(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), fsys)
	if err != nil {
		return
	}
	defer b.Close()
	for _, tp := range b.Topics() {
		if err := ValidateTopicName(tp.Name); err != nil {
			t.Fatalf("topic %q loaded: %v", tp.Name, err)
		}
		prev := int32(-1)
		for _, p := range tp.Partitions {
			if p.Index <= prev {
				t.Fatalf("topic %s: partition %d after %d", tp.Name, p.Index, prev)
			}
			prev = p.Index
			if rel, err := filepath.Rel(fuzzLogDir, p.Dir()); err != nil || strings.HasPrefix(rel, "..") || !strings.Contains(rel, "-") {
				t.Fatalf("topic %s partition %d lives at %s, outside %s", tp.Name, p.Index, p.Dir(), fuzzLogDir)
			}
			if got, err := b.Partition(tp.Name, p.Index); err != nil || got != p {
				t.Fatalf("topic %s partition %d not found by index: %v", tp.Name, p.Index, err)
			}
		}
	}
	if _, err := b.CreateTopic(CreateTopicRequest{Name: "fuzz-created", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Logf("create next to the loaded topics: %v", err)
	}
	for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		b.ScramCredential(m, "alice")
	}
	b.DescribeScram()
	b.NextProducerID()
}

// FuzzMetadataFile opens the broker over an arbitrary topic metadata file.
func FuzzMetadataFile(f *testing.F) {
	cfg := fuzzConfig(f)
	f.Add([]byte(`{"version":1,"next_producer_id":1000,"topics":[{"name":"t","id":"5f3a4b2c-1d2e-4f50-8a9b-0c1d2e3f4a5b","partitions":[{"partition":0,"dir":"/data","leader":0,"leader_epoch":0,"replicas":[0]},{"partition":1,"dir":"/data","leader":0,"leader_epoch":0,"replicas":[0]}]}]}`))
	f.Add([]byte(`{"version":1,"next_producer_id":-5,"topics":[{"name":"../x","id":"5f3a4b2c-1d2e-4f50-8a9b-0c1d2e3f4a5b","partitions":[{"partition":0,"dir":"/data"}]}]}`))
	f.Add([]byte(`{"version":1,"topics":[{"name":"t","id":"5f3a4b2c-1d2e-4f50-8a9b-0c1d2e3f4a5b","partitions":[{"partition":3,"dir":"/data"},{"partition":-1,"dir":"/data"},{"partition":3,"dir":"/data"}]}]}`))
	f.Add([]byte(`{"version":1,"cluster":true,"topics":[{"name":"a","id":"5f3a4b2c-1d2e-4f50-8a9b-0c1d2e3f4a5b","partitions":[]},{"name":"a","id":"00000000-0000-0000-0000-000000000000","partitions":[{"partition":0,"dir":"/data"}]}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, content []byte) { fuzzOpen(t, cfg, metadataFileName, content) })
}

// FuzzScramFile opens the broker over an arbitrary SCRAM credential file.
func FuzzScramFile(f *testing.F) {
	cfg := fuzzConfig(f)
	f.Add([]byte(`{"version":1,"users":{"alice":{"SCRAM-SHA-256":{"salt":"c2FsdA==","iterations":4096,"stored_key":"a2V5","server_key":"a2V5"}}}}`))
	f.Add([]byte(`{"version":1,"users":{"alice":{"SCRAM-SHA-512":{"iterations":-1}},"":null}}`))
	f.Add([]byte(`{"version":1,"users":{"alice":null}}`))
	f.Add([]byte(`{"version":0}`))
	f.Fuzz(func(t *testing.T, content []byte) { fuzzOpen(t, cfg, scramFileName, content) })
}

// FuzzMetaProperties opens the broker over an arbitrary meta.properties.
func FuzzMetaProperties(f *testing.F) {
	cfg := fuzzConfig(f)
	f.Add([]byte("#\nversion=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=0\n"))
	f.Add([]byte("node.id=7\n"))
	f.Add([]byte("cluster.id=\n! comment\nbroken line\n"))
	f.Add([]byte("version=0\nbroker.id=0\ncluster.id=\x00\xff\n"))
	f.Fuzz(func(t *testing.T, content []byte) { fuzzOpen(t, cfg, metaPropertiesName, content) })
}
