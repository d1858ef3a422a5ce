package group

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := newFakeClock()
	c, err := NewCoordinator(testConfig(clk), newMemStore(), nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Handle(context.Background(), commitReq("g", "", -1, "t", map[int32]int64{0: 1, 1: 2})); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				name += "{" + l.GetValue() + "}"
			}
			switch {
			case m.GetGauge() != nil:
				got[name] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				got[name] = m.GetCounter().GetValue()
			}
		}
	}
	if got["strata_group_groups{Empty}"] != 1 || got["strata_group_offset_commits_total"] != 2 || got["strata_group_members"] != 0 {
		t.Fatalf("metrics: %v", got)
	}
}

func TestOffsetFetchOldVersions(t *testing.T) {
	h := newHarness(t, nil)
	h.do(commitReq("g", "", -1, "t", map[int32]int64{0: 9}))
	for _, v := range []int16{1, 5, 7} {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = v
		r.Group = "g"
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 1}}}
		resp := h.do(r).(*kmsg.OffsetFetchResponse)
		ps := resp.Topics[0].Partitions
		if resp.ErrorCode != 0 || ps[0].Offset != 9 || ps[1].Offset != -1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
	}
	// v2+ null topics: everything the group committed.
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 3
	r.Group = "g"
	if resp := h.do(r).(*kmsg.OffsetFetchResponse); len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].Offset != 9 {
		t.Fatalf("all topics: %+v", resp)
	}
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version = 6
	d.Groups = []string{"nope"}
	if dr := h.do(d).(*kmsg.DescribeGroupsResponse); dr.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe v6 unknown: %+v", dr.Groups[0])
	}
}
