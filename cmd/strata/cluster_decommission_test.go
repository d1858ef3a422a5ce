package main

import (
	"slices"
	"testing"
)

// TestPlanDecommission: broker 2's replicas go to the least loaded live
// broker not already holding the partition, in place (the replica order,
// hence the preferred leader elsewhere, is kept).
func TestPlanDecommission(t *testing.T) {
	parts := map[string]map[int32][]int32{
		"a": {0: {1, 2}, 1: {2, 3}, 2: {3, 1}},
		"b": {0: {2, 4}},
	}
	moves, err := planDecommission(2, []int32{1, 2, 3, 4}, parts)
	if err != nil {
		t.Fatal(err)
	}
	want := []decomMove{
		{"a", 0, []int32{1, 2}, []int32{1, 4}},
		{"a", 1, []int32{2, 3}, []int32{1, 3}},
		{"b", 0, []int32{2, 4}, []int32{3, 4}},
	}
	if len(moves) != len(want) {
		t.Fatalf("moves %+v", moves)
	}
	for i := range want {
		if moves[i].Topic != want[i].Topic || moves[i].Partition != want[i].Partition || !slices.Equal(moves[i].To, want[i].To) {
			t.Fatalf("move %d: %+v, want %+v", i, moves[i], want[i])
		}
	}
	if _, err := planDecommission(2, []int32{1, 2}, map[string]map[int32][]int32{"c": {0: {1, 2}}}); err == nil {
		t.Fatal("a partition with nowhere to go was planned")
	}
}
