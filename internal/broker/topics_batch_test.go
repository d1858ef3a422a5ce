package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestCreateDeleteTopicsBatch: the topics of one request are checked one
// by one (a bad one fails alone), created together and survive a restart;
// deleting several at once removes their directories; acknowledged records
// of a freshly created partition survive a reopen.
func TestCreateDeleteTopicsBatch(t *testing.T) {
	dir := t.TempDir()
	b := openTest(t, dir)
	ts, errs := b.CreateTopics([]CreateTopicRequest{
		{Name: "a", NumPartitions: 300, ReplicationFactor: 1},
		{Name: "bad name", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "b.x", NumPartitions: 2, ReplicationFactor: 1},
		{Name: "b_x", NumPartitions: 2, ReplicationFactor: 1},
		{Name: "a", NumPartitions: 1, ReplicationFactor: 1},
		{Name: "v", NumPartitions: 5, ReplicationFactor: 1, ValidateOnly: true},
	})
	want := []error{nil, kerr.InvalidTopicException, nil, kerr.InvalidTopicException, kerr.TopicAlreadyExists, nil}
	for i, w := range want {
		if (w == nil) != (errs[i] == nil) || (w != nil && !errors.Is(errs[i], w)) {
			t.Errorf("topic %d: error %v, want %v", i, errs[i], w)
		}
	}
	if ts[0] == nil || len(ts[0].Partitions) != 300 || ts[5] == nil || b.Topic("v") != nil {
		t.Fatalf("created topics: %v", ts)
	}
	p, _ := b.Partition("a", 299)
	if _, err := p.Append(context.Background(), testBatch(t, 2), -1); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTest(t, dir)
	if got := b.Topic("a"); got == nil || len(got.Partitions) != 300 || b.Topic("b.x") == nil {
		t.Fatalf("topics after reopen: %v", b.Topics())
	}
	if p, _ := b.Partition("a", 299); p.Log.HighWatermark() != 2 {
		t.Fatalf("acknowledged records of a new partition after reopen: high watermark %d", p.Log.HighWatermark())
	}
	errs = b.DeleteTopics([]string{"a", "nope", "b.x", "a"})
	if errs[0] != nil || !errors.Is(errs[1], kerr.UnknownTopicOrPartition) || errs[2] != nil || !errors.Is(errs[3], kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete errors: %v", errs)
	}
	for _, d := range []string{"a-0", "a-299", "b.x-1"} {
		if _, err := os.Stat(fmt.Sprintf("%s/%s", dir, d)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after delete: %v", d, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTest(t, dir)
	defer b.Close()
	if b.Topic("a") != nil || b.Topic("b.x") != nil || b.Topic("b_x") != nil {
		t.Fatalf("topics after delete and reopen: %v", b.Topics())
	}
}
