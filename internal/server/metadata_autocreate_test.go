package server_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestMetadataAutoCreateAnswersLeaderNotAvailable: as in Kafka, the
// Metadata request that auto-creates a topic is answered
// LEADER_NOT_AVAILABLE without partitions, and the next one describes the
// topic (kafka-go's TestConn "delete topics" reads partitions of deleted
// topics with auto-create on and expects none).
func TestMetadataAutoCreateAnswersLeaderNotAvailable(t *testing.T) {
	tb := startBroker(t, "", nil)
	ctx := ctxT(t)
	cl := tb.Client()
	for _, v := range []int16{1, 12} {
		name := "auto-v" + string(rune('0'+v%10))
		req := kmsg.NewPtrMetadataRequest()
		req.Version = v
		req.AllowAutoTopicCreation = true
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || len(resp.Topics[0].Partitions) != 0 {
			t.Fatalf("v%d creating request: %+v, want LEADER_NOT_AVAILABLE and no partitions", v, resp.Topics)
		}
		if tb.Server().Broker().Topic(name) == nil {
			t.Fatalf("v%d: topic %s not created", v, name)
		}
		resp, err = req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d next request: %+v, want the topic with its partition", v, resp.Topics)
		}
	}
}
