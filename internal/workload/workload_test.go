package workload

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestCleanRunIsValid runs every client kind against kfake with no fault:
// the checker must find nothing, and every kind of operation must appear.
func TestCleanRunIsValid(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Start(ctx, Config{Brokers: c.ListenAddrs(), Topic: "clean", Partitions: 3,
		Producers: 2, TxnProducers: 1, GroupConsumers: 1, AssignConsumers: 1, EtlWorkers: 2, Rate: 50, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // let the clients work; nothing is asserted on time
	r.Stop()
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	res := r.Check()
	var buf bytes.Buffer
	_ = res.WriteReport(&buf)
	if !res.Valid() {
		t.Fatalf("clean run flagged:\n%s", buf.String())
	}
	st := res.Stats
	if st.AckedSends == 0 || st.ValuesRead == 0 || st.Ops["txn"]["ok"] == 0 || st.Ops["poll"]["ok"] == 0 || st.ConsumeTxnsCommitted == 0 {
		t.Fatalf("workload did too little:\n%s", buf.String())
	}
	t.Log(res.Summary())
}
