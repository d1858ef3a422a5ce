package compat

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestRetentionAdvancesLogStart: with retention.ms and segment.ms small,
// closed segments are deleted; every client sees the log start offset move
// up to the end and a fetch from the beginning start at the next record.
func TestRetentionAdvancesLogStart(t *testing.T) {
	t.Parallel()
	if targetKfake() {
		t.Skip("the retention timing knobs are Strata's")
	}
	b := startBroker(t, brokerOpts{extra: map[string]string{
		"log.retention.check.interval.ms":    "50",
		"strata.idle.roll.check.interval.ms": "50",
	}})
	const topic = "short-lived"
	adminCreate(t, b, topic, 1, map[string]string{"retention.ms": "200", "segment.ms": "100"})
	waitTopic(t, b, topic, 1)
	var recs []Rec
	for i := 0; i < 10; i++ {
		recs = append(recs, Rec{Key: strp(fmt.Sprintf("k%d", i)), Value: strp("expires")})
	}
	saramaClient().Must(t, b.Addr(), Op{Op: opProduce, Topic: topic, Records: recs})
	adm := b.Admin(t)
	waitFor(t, "retention deletes the expired segment", 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return err
		}
		o, ok := starts.Lookup(topic, 0)
		if !ok || o.Err != nil || o.Offset != 10 {
			return fmt.Errorf("log start offset %+v", o)
		}
		return nil
	})
	// Stop expiring before producing the record the clients must see.
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	long := "604800000"
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &long}}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = ar.On(topic, nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("raise retention.ms: %v", err)
	}
	next := Rec{Key: strp("fresh"), Value: strp("after retention"), Offset: 10}
	saramaClient().Must(t, b.Addr(), Op{Op: opProduce, Topic: topic, Records: []Rec{next}})
	for _, c := range allClients {
		t.Run(c.name, func(t *testing.T) {
			cl := c.make(t)
			got := cl.Must(t, b.Addr(), Op{Op: opFetch, Topic: topic, Offset: -2, Max: 1}).Records
			checkRecords(t, cl.Name+" fetch from beginning after retention", got, []Rec{next}, false)
			if cl.can(opWatermarks) {
				r := cl.Must(t, b.Addr(), Op{Op: opWatermarks, Topic: topic})
				if r.Low < 10 || r.High != 11 {
					t.Errorf("%s watermarks after retention: low %d high %d, want low >= 10, high 11", cl.Name, r.Low, r.High)
				}
			}
		})
	}
}
