package checker

import (
	"testing"
	"time"
)

// TestCheckMetadata: hand-built topic administration histories, valid and
// not, judged per topic name by porcupine.
func TestCheckMetadata(t *testing.T) {
	op := func(k MetaKind, topic string, out MetaOutcome, start, end int64) MetaOp {
		return MetaOp{Kind: k, Topic: topic, Outcome: out, Start: start, End: end, Partitions: 1, Value: "v0"}
	}
	alter := func(v string, out MetaOutcome, start, end int64) MetaOp {
		o := op(MetaAlter, "a", out, start, end)
		o.Value = v
		return o
	}
	read := func(exists bool, parts int32, v string, start, end int64) MetaOp {
		return MetaOp{Kind: MetaRead, Topic: "a", Outcome: MetaOK, Exists: exists, Partitions: parts, Value: v, Start: start, End: end}
	}
	grow := func(n int32, out MetaOutcome, start, end int64) MetaOp {
		o := op(MetaCreatePartitions, "a", out, start, end)
		o.Partitions = n
		return o
	}
	cases := []struct {
		name  string
		ops   []MetaOp
		valid bool
	}{
		{"create, exists, alter, grow, read", []MetaOp{op(MetaCreate, "a", MetaOK, 0, 10), op(MetaCreate, "a", MetaExists, 11, 12),
			alter("v1", MetaOK, 13, 14), grow(3, MetaOK, 15, 16), grow(2, MetaInvalidPartitions, 17, 18), read(true, 3, "v1", 20, 21)}, true},
		{"two creates both ok without a delete", []MetaOp{op(MetaCreate, "a", MetaOK, 0, 10), op(MetaCreate, "a", MetaOK, 11, 12)}, false},
		{"concurrent creates: one wins", []MetaOp{op(MetaCreate, "a", MetaOK, 0, 10), op(MetaCreate, "a", MetaExists, 1, 9)}, true},
		{"exists before any create", []MetaOp{op(MetaCreate, "a", MetaExists, 0, 1), op(MetaCreate, "a", MetaOK, 2, 3)}, false},
		{"delete then create, and exists while deleting", []MetaOp{op(MetaCreate, "a", MetaOK, 0, 1), op(MetaDelete, "a", MetaOK, 2, 10),
			op(MetaCreate, "a", MetaExists, 3, 4), op(MetaAlter, "a", MetaUnknownTopic, 5, 6), op(MetaCreate, "a", MetaOK, 11, 12)}, true},
		{"alter unknown after create returned", []MetaOp{op(MetaCreate, "a", MetaOK, 0, 1), op(MetaAlter, "a", MetaUnknownTopic, 2, 3)}, false},
		{"lost alter: the read shows an older value", []MetaOp{op(MetaCreate, "a", MetaOK, 0, 1), alter("v1", MetaOK, 2, 3),
			read(true, 1, "v0", 10, 11)}, false},
		{"indeterminate alter may or may not apply", []MetaOp{op(MetaCreate, "a", MetaOK, 0, 1), alter("v1", MetaIndeterminate, 2, 3),
			read(true, 1, "v1", 10, 11)}, true},
		{"refused leaves no trace", []MetaOp{op(MetaCreate, "a", MetaRefused, 0, 1), read(false, 0, "", 10, 11)}, true},
		{"grow refused below the count", []MetaOp{op(MetaCreate, "a", MetaOK, 0, 1), grow(2, MetaInvalidPartitions, 2, 3)}, false},
	}
	for _, c := range cases {
		res := CheckMetadata(c.ops, 10*time.Second)
		if res.Valid() != c.valid {
			t.Errorf("%s: valid %v, want %v:\n%s", c.name, res.Valid(), c.valid, res)
		}
	}
	// Names are judged apart.
	res := CheckMetadata([]MetaOp{op(MetaCreate, "a", MetaOK, 0, 1), op(MetaCreate, "b", MetaOK, 0, 1), op(MetaCreate, "b", MetaOK, 2, 3)}, 0)
	if res.Verdict["a"] != "ok" || res.Verdict["b"] != "illegal" || len(res.Illegal["b"]) == 0 {
		t.Fatalf("per name: %s", res)
	}
}
