package server_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKafkaGoOffsetRequests sends the exact requests segmentio/kafka-go
// v0.4.51's Reader and its test helper getOffsets send to read a group's
// committed offsets: FindCoordinator v0, OffsetCommit v2 (the Reader's
// commit) and OffsetFetch v1 for one topic and a partition list, and checks
// every field that helper reads. The answers are Kafka's (KafkaApis
// handleOffsetFetchRequest, GroupCoordinator.handleFetchOffsets): one entry
// per requested partition, in the requested order, with the committed
// offset, or -1 and no error for a partition (or topic) never committed;
// v1 has no top-level error code.
//
// (kafka-go's getOffsets panics before sending anything, whatever the
// broker: it builds a ConsumerGroup without its connect function; see
// docs/compatibility.md. This test pins what the broker side answers.)
func TestKafkaGoOffsetRequests(t *testing.T) {
	// kgo sends a request at the highest version both sides support unless
	// the request's MaxVersion says otherwise: pinned sends it at the
	// version set on it, as kafka-go does.
	at := func(v int16, req kmsg.Request) kmsg.Request {
		req.SetVersion(v)
		return pinned{req}
	}
	b := startBroker(t, "", nil)
	ctx := ctxT(t)
	if _, err := b.Admin().CreateTopic(ctx, 3, 1, nil, "kg"); err != nil {
		t.Fatal(err)
	}
	const group = "kafka-go-group"

	// FindCoordinator v0: the first answer may be COORDINATOR_NOT_AVAILABLE
	// while __consumer_offsets is created (Kafka does the same).
	eventually(t, "coordinator", func() error {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = group
		resp := request(t, b.Addr(), at(0, req)).(*kmsg.FindCoordinatorResponse)
		if resp.Version != 0 {
			t.Fatalf("FindCoordinator answered at v%d, want v0", resp.Version)
		}
		if resp.ErrorCode != 0 {
			return kerr.ErrorForCode(resp.ErrorCode)
		}
		if resp.NodeID < 0 || resp.Host == "" || resp.Port <= 0 {
			return fmt.Errorf("coordinator %d at %s:%d", resp.NodeID, resp.Host, resp.Port)
		}
		return nil
	})

	// OffsetCommit v2 as kafka-go's Reader sends it (here outside a
	// generation: generation -1, no member id, as a simple consumer).
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = group
	commit.Generation = -1
	commit.RetentionTimeMillis = 3600000
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "kg"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 2
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp := request(t, b.Addr(), at(2, commit)).(*kmsg.OffsetCommitResponse)
	if len(cresp.Topics) != 1 || len(cresp.Topics[0].Partitions) != 1 || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetCommit v2: %+v", cresp.Topics)
	}

	// OffsetFetch v1: partitions 0 (committed), 2 and 1 (not) of kg, and a
	// topic with no commits.
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = group
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "kg", []int32{0, 2, 1}
	fu := kmsg.NewOffsetFetchRequestTopic()
	fu.Topic, fu.Partitions = "never-committed", []int32{0}
	fetch.Topics = append(fetch.Topics, ft, fu)
	fresp := request(t, b.Addr(), at(1, fetch)).(*kmsg.OffsetFetchResponse)
	if fresp.Version != 1 {
		t.Fatalf("OffsetFetch answered at v%d, want v1", fresp.Version)
	}
	got := map[string][]string{}
	for _, tr := range fresp.Topics {
		for _, p := range tr.Partitions {
			got[tr.Topic] = append(got[tr.Topic], fmt.Sprintf("%d@%d err=%d", p.Partition, p.Offset, p.ErrorCode))
		}
	}
	want := map[string][]string{
		"kg":              {"0@2 err=0", "2@-1 err=0", "1@-1 err=0"},
		"never-committed": {"0@-1 err=0"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(fresp.Topics) != 2 || fresp.Topics[0].Topic != "kg" {
		t.Fatalf("OffsetFetch v1 answered %v (topics in order %q, %q), want %v", got, fresp.Topics[0].Topic, fresp.Topics[len(fresp.Topics)-1].Topic, want)
	}
}

// pinned sends its request at the version set on it.
type pinned struct{ kmsg.Request }

// MaxVersion is the version set on the request.
func (p pinned) MaxVersion() int16 { return p.GetVersion() }
