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

// TestCheckMetadataACLs: hand-built ACL administration histories on one
// resource, judged by ACLModel; a deletion's listed matches reveal the
// bindings it was decided on.
func TestCheckMetadataACLs(t *testing.T) {
	create := func(p string, out MetaOutcome, start, end int64) MetaOp {
		return MetaOp{Kind: MetaCreateACL, Topic: "r", Principal: p, Outcome: out, Start: start, End: end}
	}
	del := func(p string, matched []string, out MetaOutcome, start, end int64) MetaOp {
		return MetaOp{Kind: MetaDeleteACL, Topic: "r", Principal: p, Matched: matched, Outcome: out, Start: start, End: end}
	}
	read := func(matched []string, at int64) MetaOp {
		return MetaOp{Client: -1, Kind: MetaReadACL, Topic: "r", Matched: matched, Outcome: MetaOK, Start: at, End: at}
	}
	a, b := "User:a", "User:b"
	cases := []struct {
		name  string
		ops   []MetaOp
		valid bool
	}{
		{"create twice counts once, delete lists it", []MetaOp{create(a, MetaOK, 0, 1), create(a, MetaOK, 2, 3),
			del(a, []string{a}, MetaOK, 4, 5), read(nil, 10)}, true},
		{"delete any lists both", []MetaOp{create(a, MetaOK, 0, 1), create(b, MetaOK, 0, 1), del("", []string{b, a}, MetaOK, 2, 3),
			read(nil, 10)}, true},
		{"stale delete: created before, deletion matched nothing", []MetaOp{create(a, MetaOK, 0, 1), del(a, nil, MetaOK, 2, 3)}, false},
		{"concurrent create and delete: either order", []MetaOp{create(a, MetaOK, 0, 10), del(a, nil, MetaOK, 1, 9), read([]string{a}, 20)}, true},
		{"deleted binding still read", []MetaOp{create(a, MetaOK, 0, 1), del(a, []string{a}, MetaOK, 2, 3), read([]string{a}, 10)}, false},
		{"lost create", []MetaOp{create(a, MetaOK, 0, 1), create(b, MetaOK, 2, 3), read([]string{b}, 10)}, false},
		{"indeterminate create may apply", []MetaOp{create(a, MetaIndeterminate, 0, 1), read([]string{a}, 10)}, true},
		{"indeterminate create may not apply", []MetaOp{create(a, MetaIndeterminate, 0, 1), read(nil, 10)}, true},
		{"indeterminate delete any may remove part", []MetaOp{create(a, MetaOK, 0, 1), create(b, MetaOK, 0, 1),
			del("", nil, MetaIndeterminate, 2, 3), read([]string{b}, 10)}, true},
		{"delete lists a binding never created", []MetaOp{del(a, []string{a}, MetaOK, 0, 1)}, false},
	}
	for _, c := range cases {
		res := CheckMetadata(c.ops, 10*time.Second)
		if res.Valid() != c.valid {
			t.Errorf("%s: valid %v, want %v:\n%s", c.name, res.Valid(), c.valid, res)
		}
	}
	// A topic and an ACL resource of the same name are judged apart.
	res := CheckMetadata([]MetaOp{{Kind: MetaCreate, Topic: "r", Partitions: 1, Outcome: MetaOK, Start: 0, End: 1},
		create(a, MetaOK, 0, 1), del(a, nil, MetaOK, 2, 3)}, 0)
	if res.Verdict["r"] != "ok" || res.Verdict["acls:r"] != "illegal" || len(res.Illegal["acls:r"]) == 0 {
		t.Fatalf("apart: %s", res)
	}
}
