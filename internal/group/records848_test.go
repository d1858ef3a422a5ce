package group

import (
	"bytes"
	"reflect"
	"testing"
)

type consumerValue interface {
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
}

func strp(s string) *string { return &s }

// sampleConsumerValues returns one value of each KIP-848 record type with
// every field set, and its empty counterpart for decoding into.
func sampleConsumerValues() map[int16][2]consumerValue {
	tps := []consumerTopicPartitions{{TopicID: [16]byte{1, 2}, Partitions: []int32{0, 3}}, {TopicID: [16]byte{9}, Partitions: []int32{}}}
	return map[int16][2]consumerValue{
		recConsumerGroupMetadata: {&consumerGroupMetadataValue{Epoch: 7, MetadataHash: -5, CreationTimeMs: 1700}, new(consumerGroupMetadataValue)},
		recConsumerGroupPartitionMetadata: {&consumerPartitionMetadataValue{Topics: []consumerTopicMetadata{
			{TopicID: [16]byte{1}, TopicName: "t", NumPartitions: 4, PartitionMetadata: []consumerPartitionRacks{{Partition: 1, Racks: []string{"a", "b"}}}},
			{TopicID: [16]byte{2}, TopicName: "u", NumPartitions: 1, PartitionMetadata: []consumerPartitionRacks{}},
		}}, new(consumerPartitionMetadataValue)},
		recConsumerGroupMemberMetadata: {&consumerMemberMetadataValue{InstanceID: strp("i"), RackID: strp("r"), ClientID: "c", ClientHost: "/h",
			SubscribedTopicNames: []string{"t", "u"}, SubscribedTopicRegex: strp("t.*"), RebalanceTimeoutMs: 30000, ServerAssignor: strp("range")},
			new(consumerMemberMetadataValue)},
		recConsumerGroupTargetAssignment: {&consumerTargetAssignmentMetadataValue{AssignmentEpoch: 3}, new(consumerTargetAssignmentMetadataValue)},
		recConsumerGroupTargetMember:     {&consumerTargetMemberValue{TopicPartitions: tps}, new(consumerTargetMemberValue)},
		recConsumerGroupCurrentAssignment: {&consumerCurrentAssignmentValue{MemberEpoch: 4, PreviousMemberEpoch: 3, State: memberStateUnrevokedPartitions,
			AssignedPartitions: tps, PartitionsPendingRevocation: tps[:1]}, new(consumerCurrentAssignmentValue)},
	}
}

func TestConsumerRecordsRoundTrip(t *testing.T) {
	for typ, vs := range sampleConsumerValues() {
		in, out := vs[0], vs[1]
		b := in.AppendTo(nil)
		if err := out.ReadFrom(b); err != nil {
			t.Fatalf("type %d: %v", typ, err)
		}
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("type %d: decoded %+v, wrote %+v", typ, out, in)
		}
		if !bytes.Equal(out.AppendTo(nil), b) {
			t.Fatalf("type %d: re-encoding differs", typ)
		}
		if err := out.ReadFrom(b[:len(b)-1]); err == nil {
			t.Fatalf("type %d: truncated value decoded", typ)
		}
		if err := out.ReadFrom(append(append([]byte{}, b...), 0)); err == nil {
			t.Fatalf("type %d: trailing byte accepted", typ)
		}
		k := consumerKey{Type: typ, Group: "g", Member: "m"}
		if !consumerKeyHasMember(typ) {
			k.Member = ""
		}
		var k2 consumerKey
		if err := k2.ReadFrom(k.AppendTo(nil)); err != nil || k2 != k {
			t.Fatalf("key %+v: decoded %+v, %v", k, k2, err)
		}
		if _, err := validConsumerRecord(k.AppendTo(nil), b); err != nil {
			t.Fatalf("type %d: %v", typ, err)
		}
	}
}

// TestConsumerRecordsSchemaBytes checks the encodings against bytes built
// by hand from Kafka's JSON schemas
// (group-coordinator/src/main/resources/common/message/ConsumerGroup*.json).
func TestConsumerRecordsSchemaBytes(t *testing.T) {
	cases := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"ConsumerGroupMemberMetadataKey (version 5: GroupId, MemberId as int16-length strings)",
			consumerKey{Type: 5, Group: "g", Member: "m1"}.AppendTo(nil),
			[]byte{0, 5, 0, 1, 'g', 0, 2, 'm', '1'}},
		{"ConsumerGroupMetadataKey (version 3: GroupId)",
			consumerKey{Type: 3, Group: "grp"}.AppendTo(nil),
			[]byte{0, 3, 0, 3, 'g', 'r', 'p'}},
		{"ConsumerGroupMetadataValue v0: Epoch, no tagged fields at their defaults",
			(&consumerGroupMetadataValue{Epoch: 258, CreationTimeMs: -1}).AppendTo(nil),
			[]byte{0, 0, 0, 0, 1, 2, 0}},
		{"ConsumerGroupMetadataValue v0: MetadataHash as tag 0",
			(&consumerGroupMetadataValue{Epoch: 1, MetadataHash: 2, CreationTimeMs: -1}).AppendTo(nil),
			[]byte{0, 0, 0, 0, 0, 1, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 2}},
		{"ConsumerGroupMemberMetadataValue v0",
			(&consumerMemberMetadataValue{InstanceID: nil, RackID: strp("r"), ClientID: "c", ClientHost: "/h",
				SubscribedTopicNames: []string{"t"}, SubscribedTopicRegex: nil, RebalanceTimeoutMs: -1, ServerAssignor: strp("uniform")}).AppendTo(nil),
			[]byte{0, 0, // version
				0,      // InstanceId null
				2, 'r', // RackId
				2, 'c', // ClientId
				3, '/', 'h', // ClientHost
				2, 2, 't', // SubscribedTopicNames [t]
				0,                      // SubscribedTopicRegex null
				0xff, 0xff, 0xff, 0xff, // RebalanceTimeoutMs -1
				8, 'u', 'n', 'i', 'f', 'o', 'r', 'm', // ServerAssignor
				0, // tagged fields
			}},
		{"ConsumerGroupTargetAssignmentMetadataValue v0",
			(&consumerTargetAssignmentMetadataValue{AssignmentEpoch: 5}).AppendTo(nil),
			[]byte{0, 0, 0, 0, 0, 5, 0}},
		{"ConsumerGroupCurrentMemberAssignmentValue v0",
			(&consumerCurrentAssignmentValue{MemberEpoch: 3, PreviousMemberEpoch: 2, State: 0,
				AssignedPartitions:          []consumerTopicPartitions{{TopicID: [16]byte{15: 7}, Partitions: []int32{1, 2}}},
				PartitionsPendingRevocation: []consumerTopicPartitions{}}).AppendTo(nil),
			append(append([]byte{0, 0, 0, 0, 0, 3, 0, 0, 0, 2, 0, // version, MemberEpoch, PreviousMemberEpoch, State
				2}, // AssignedPartitions: one TopicPartitions
				[]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}...), // TopicId
				3, 0, 0, 0, 1, 0, 0, 0, 2, // Partitions [1 2]
				0, // TopicPartitions tagged fields
				1, // PartitionsPendingRevocation: empty
				0, // tagged fields
			)},
		{"ConsumerGroupPartitionMetadataValue v0",
			(&consumerPartitionMetadataValue{Topics: []consumerTopicMetadata{{TopicID: [16]byte{0: 1}, TopicName: "t", NumPartitions: 2, PartitionMetadata: []consumerPartitionRacks{}}}}).AppendTo(nil),
			append(append([]byte{0, 0, 2}, []byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}...),
				2, 't', 0, 0, 0, 2, 1, 0, // TopicName, NumPartitions, PartitionMetadata [], TopicMetadata tags
				0), // tagged fields
		},
	}
	for _, c := range cases {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, c.got, c.want)
		}
	}
	// A field Kafka adds later as a tagged field (here tag 5 on
	// ConsumerGroupTargetAssignmentMetadataValue) is skipped.
	var v consumerTargetAssignmentMetadataValue
	if err := v.ReadFrom([]byte{0, 0, 0, 0, 0, 9, 1, 5, 2, 0xaa, 0xbb}); err != nil || v.AssignmentEpoch != 9 {
		t.Fatalf("unknown tag: %+v %v", v, err)
	}
	// ClassicMemberMetadata (tag 0 of ConsumerGroupMemberMetadataValue) is
	// skipped too.
	mv := (&consumerMemberMetadataValue{ClientID: "c", SubscribedTopicNames: []string{}}).AppendTo(nil)
	mv = append(mv[:len(mv)-1], 1, 0, 3, 1, 0, 0) // one tag: 0, 3 bytes
	var m consumerMemberMetadataValue
	if err := m.ReadFrom(mv); err != nil || m.ClientID != "c" {
		t.Fatalf("classic member metadata tag: %+v %v", m, err)
	}
	if err := new(consumerGroupMetadataValue).ReadFrom([]byte{0, 1, 0, 0, 0, 1, 0}); err == nil {
		t.Fatal("value version 1 accepted")
	}
}

func fuzzConsumerValue(f *testing.F, typ int16, newV func() consumerValue) {
	f.Add(sampleConsumerValues()[typ][0].AppendTo(nil))
	f.Add([]byte{0, 0})
	f.Add([]byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		v := newV()
		if err := v.ReadFrom(b); err != nil {
			return
		}
		// What decodes encodes back to something that decodes the same.
		enc := v.AppendTo(nil)
		v2 := newV()
		if err := v2.ReadFrom(enc); err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
		if !bytes.Equal(v2.AppendTo(nil), enc) {
			t.Fatal("re-encoding is not stable")
		}
	})
}

func FuzzConsumerGroupMetadataValue(f *testing.F) {
	fuzzConsumerValue(f, recConsumerGroupMetadata, func() consumerValue { return new(consumerGroupMetadataValue) })
}

func FuzzConsumerGroupPartitionMetadataValue(f *testing.F) {
	fuzzConsumerValue(f, recConsumerGroupPartitionMetadata, func() consumerValue { return new(consumerPartitionMetadataValue) })
}

func FuzzConsumerGroupMemberMetadataValue(f *testing.F) {
	fuzzConsumerValue(f, recConsumerGroupMemberMetadata, func() consumerValue { return new(consumerMemberMetadataValue) })
}

func FuzzConsumerGroupTargetAssignmentMetadataValue(f *testing.F) {
	fuzzConsumerValue(f, recConsumerGroupTargetAssignment, func() consumerValue { return new(consumerTargetAssignmentMetadataValue) })
}

func FuzzConsumerGroupTargetAssignmentMemberValue(f *testing.F) {
	fuzzConsumerValue(f, recConsumerGroupTargetMember, func() consumerValue { return new(consumerTargetMemberValue) })
}

func FuzzConsumerGroupCurrentMemberAssignmentValue(f *testing.F) {
	fuzzConsumerValue(f, recConsumerGroupCurrentAssignment, func() consumerValue { return new(consumerCurrentAssignmentValue) })
}

func FuzzConsumerGroupRecordKey(f *testing.F) {
	f.Add(consumerKey{Type: 5, Group: "g", Member: "m"}.AppendTo(nil))
	f.Add(consumerKey{Type: 3, Group: "g"}.AppendTo(nil))
	f.Add([]byte{0, 8, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var k consumerKey
		if err := k.ReadFrom(b); err != nil {
			return
		}
		if !bytes.Equal(k.AppendTo(nil), b) {
			t.Fatalf("key %+v re-encodes differently", k)
		}
	})
}
