package server_test

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSmokeProduceConsume(t *testing.T) {
	tb := startBroker(t, "", nil)
	adm := tb.Admin()
	ctx := ctxT(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "smoke"); err != nil {
		t.Fatal(err)
	}
	cl := tb.Client(kgo.DefaultProduceTopic("smoke"))
	for i := 0; i < 10; i++ {
		r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("v%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons := tb.Client(kgo.ConsumeTopics("smoke"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < 10 {
		fs := cons.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
}
