package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// This file encodes the __consumer_offsets records that hold the state of
// KIP-848 ("consumer" protocol) groups, exactly as Kafka's group
// coordinator writes them. kmsg has no structs for them (they are storage
// records, not requests), so they are written here from Kafka's schemas in
// group-coordinator/src/main/resources/common/message/:
//
//	ConsumerGroupMetadataKey/Value                 record type (key version) 3
//	ConsumerGroupPartitionMetadataKey/Value        4
//	ConsumerGroupMemberMetadataKey/Value           5
//	ConsumerGroupTargetAssignmentMetadataKey/Value 6
//	ConsumerGroupTargetAssignmentMemberKey/Value   7
//	ConsumerGroupCurrentMemberAssignmentKey/Value  8
//
// A key is its record type as an int16 (Kafka's "coordinator-key" apiKey,
// the key version in the older schema files) followed by the key's fields
// in the non-flexible encoding (int16-length strings). A value is its
// version as an int16 (always 0) followed by the fields in the flexible
// encoding (compact strings, arrays and bytes with unsigned-varint lengths
// plus one, a tagged-field section at the end of every struct). Tagged
// fields the schema names are decoded (ConsumerGroupMetadataValue's
// MetadataHash, tag 0, and CreationTimeMs, tag 1); other tags (such as
// ConsumerGroupMemberMetadataValue's ClassicMemberMetadata, which only
// members of classic-to-consumer upgraded groups carry) are skipped, as a
// Kafka reader skips tags it does not know. A null value is a tombstone.

// KIP-848 record types: the first int16 of the key.
const (
	recConsumerGroupMetadata                int16 = 3
	recConsumerGroupPartitionMetadata       int16 = 4
	recConsumerGroupMemberMetadata          int16 = 5
	recConsumerGroupTargetAssignment        int16 = 6 // ConsumerGroupTargetAssignmentMetadata
	recConsumerGroupTargetMember            int16 = 7 // ConsumerGroupTargetAssignmentMember
	recConsumerGroupCurrentAssignment       int16 = 8 // ConsumerGroupCurrentMemberAssignment
	consumerRecordValueVersion              int16 = 0
	consumerRecordFirst, consumerRecordLast       = recConsumerGroupMetadata, recConsumerGroupCurrentAssignment
)

// Member states of ConsumerGroupCurrentMemberAssignmentValue.State (Kafka's
// org.apache.kafka.coordinator.group.modern.MemberState).
const (
	memberStateStable               int8 = 0
	memberStateUnrevokedPartitions  int8 = 1
	memberStateUnreleasedPartitions int8 = 2
)

// memberEpochLeftStatic is the member epoch of a static member that left
// temporarily (Kafka's LEAVE_GROUP_STATIC_MEMBER_EPOCH).
const memberEpochLeftStatic int32 = -2

// consumerKey is the key of a KIP-848 record: types 3, 4 and 6 hold only
// the group id, 5, 7 and 8 the group and member ids.
type consumerKey struct {
	Type   int16
	Group  string
	Member string
}

func consumerKeyHasMember(t int16) bool {
	return t == recConsumerGroupMemberMetadata || t == recConsumerGroupTargetMember || t == recConsumerGroupCurrentAssignment
}

// AppendTo appends the key's encoding to b.
func (k consumerKey) AppendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(k.Type))
	b = appendString(b, k.Group)
	if consumerKeyHasMember(k.Type) {
		b = appendString(b, k.Member)
	}
	return b
}

// ReadFrom decodes a KIP-848 record key.
func (k *consumerKey) ReadFrom(src []byte) error {
	r := reader{b: src}
	k.Type = r.int16()
	if k.Type < consumerRecordFirst || k.Type > consumerRecordLast {
		return fmt.Errorf("record type %d is not a consumer group record", k.Type)
	}
	k.Group = r.string()
	k.Member = ""
	if consumerKeyHasMember(k.Type) {
		k.Member = r.string()
	}
	return r.done("consumer group record key")
}

// consumerGroupMetadataValue is ConsumerGroupMetadataValue v0.
type consumerGroupMetadataValue struct {
	Epoch          int32
	MetadataHash   int64 // tag 0, default 0 (KIP-1101)
	CreationTimeMs int64 // tag 1, default -1 (KIP-1282)
}

func (v *consumerGroupMetadataValue) AppendTo(b []byte) []byte {
	var tags []tagged
	if v.MetadataHash != 0 {
		tags = append(tags, tagged{0, binary.BigEndian.AppendUint64(nil, uint64(v.MetadataHash))})
	}
	if v.CreationTimeMs != -1 {
		tags = append(tags, tagged{1, binary.BigEndian.AppendUint64(nil, uint64(v.CreationTimeMs))})
	}
	return appendValue(b, tags, func(b []byte) []byte {
		return binary.BigEndian.AppendUint32(b, uint32(v.Epoch))
	})
}

func (v *consumerGroupMetadataValue) ReadFrom(src []byte) error {
	v.MetadataHash, v.CreationTimeMs = 0, -1
	known := func(tag uint32, data []byte) error {
		if tag > 1 {
			return nil
		}
		if len(data) != 8 {
			return fmt.Errorf("tag %d of %d bytes, want 8", tag, len(data))
		}
		if tag == 0 {
			v.MetadataHash = int64(binary.BigEndian.Uint64(data))
		} else {
			v.CreationTimeMs = int64(binary.BigEndian.Uint64(data))
		}
		return nil
	}
	return readValue(src, "ConsumerGroupMetadataValue", known, func(r *reader) {
		v.Epoch = r.int32()
	})
}

// consumerTopicMetadata is ConsumerGroupPartitionMetadataValue.TopicMetadata.
type consumerTopicMetadata struct {
	TopicID       [16]byte
	TopicName     string
	NumPartitions int32
	// PartitionMetadata (racks per partition) is deprecated since Kafka
	// 4.0; Strata writes it empty, as Kafka does without rack information.
	PartitionMetadata []consumerPartitionRacks
}

// consumerPartitionRacks is TopicMetadata.PartitionMetadata.
type consumerPartitionRacks struct {
	Partition int32
	Racks     []string
}

// consumerPartitionMetadataValue is ConsumerGroupPartitionMetadataValue v0:
// the metadata of the topics the group subscribes to when its target
// assignment was computed.
type consumerPartitionMetadataValue struct {
	Topics []consumerTopicMetadata
}

func (v *consumerPartitionMetadataValue) AppendTo(b []byte) []byte {
	return appendValue(b, nil, func(b []byte) []byte {
		return appendStructs(b, v.Topics, func(b []byte, t consumerTopicMetadata) []byte {
			b = append(b, t.TopicID[:]...)
			b = appendCompactString(b, t.TopicName)
			b = binary.BigEndian.AppendUint32(b, uint32(t.NumPartitions))
			return appendStructs(b, t.PartitionMetadata, func(b []byte, p consumerPartitionRacks) []byte {
				b = binary.BigEndian.AppendUint32(b, uint32(p.Partition))
				return appendCompactStrings(b, p.Racks)
			})
		})
	})
}

func (v *consumerPartitionMetadataValue) ReadFrom(src []byte) error {
	return readValue(src, "ConsumerGroupPartitionMetadataValue", nil, func(r *reader) {
		v.Topics = readStructs(r, 16+1+4+1+1, func(r *reader) (t consumerTopicMetadata) {
			t.TopicID = r.uuid()
			t.TopicName = r.compactString()
			t.NumPartitions = r.int32()
			t.PartitionMetadata = readStructs(r, 4+1+1, func(r *reader) consumerPartitionRacks {
				return consumerPartitionRacks{Partition: r.int32(), Racks: r.compactStrings()}
			})
			return t
		})
	})
}

// consumerMemberMetadataValue is ConsumerGroupMemberMetadataValue v0: a
// member's subscription.
type consumerMemberMetadataValue struct {
	InstanceID           *string
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	RebalanceTimeoutMs   int32
	ServerAssignor       *string
	// ClassicMemberMetadata (tag 0) is only set for members that joined
	// with the classic protocol, which Strata's consumer groups do not
	// have: it is never written and skipped when read.
}

func (v *consumerMemberMetadataValue) AppendTo(b []byte) []byte {
	return appendValue(b, nil, func(b []byte) []byte {
		b = appendCompactNullableString(b, v.InstanceID)
		b = appendCompactNullableString(b, v.RackID)
		b = appendCompactString(b, v.ClientID)
		b = appendCompactString(b, v.ClientHost)
		b = appendCompactStrings(b, v.SubscribedTopicNames)
		b = appendCompactNullableString(b, v.SubscribedTopicRegex)
		b = binary.BigEndian.AppendUint32(b, uint32(v.RebalanceTimeoutMs))
		return appendCompactNullableString(b, v.ServerAssignor)
	})
}

func (v *consumerMemberMetadataValue) ReadFrom(src []byte) error {
	return readValue(src, "ConsumerGroupMemberMetadataValue", nil, func(r *reader) {
		v.InstanceID = r.compactNullableString()
		v.RackID = r.compactNullableString()
		v.ClientID = r.compactString()
		v.ClientHost = r.compactString()
		v.SubscribedTopicNames = r.compactStrings()
		v.SubscribedTopicRegex = r.compactNullableString()
		v.RebalanceTimeoutMs = r.int32()
		v.ServerAssignor = r.compactNullableString()
	})
}

// consumerTargetAssignmentMetadataValue is
// ConsumerGroupTargetAssignmentMetadataValue v0.
type consumerTargetAssignmentMetadataValue struct {
	AssignmentEpoch int32
}

func (v *consumerTargetAssignmentMetadataValue) AppendTo(b []byte) []byte {
	return appendValue(b, nil, func(b []byte) []byte {
		return binary.BigEndian.AppendUint32(b, uint32(v.AssignmentEpoch))
	})
}

func (v *consumerTargetAssignmentMetadataValue) ReadFrom(src []byte) error {
	return readValue(src, "ConsumerGroupTargetAssignmentMetadataValue", nil, func(r *reader) {
		v.AssignmentEpoch = r.int32()
	})
}

// consumerTopicPartitions is a topic id with partitions, the element of
// ConsumerGroupTargetAssignmentMemberValue.TopicPartitions and of
// ConsumerGroupCurrentMemberAssignmentValue's TopicPartitions common struct.
type consumerTopicPartitions struct {
	TopicID    [16]byte
	Partitions []int32
}

func appendTopicPartitions(b []byte, ts []consumerTopicPartitions) []byte {
	return appendStructs(b, ts, func(b []byte, t consumerTopicPartitions) []byte {
		b = append(b, t.TopicID[:]...)
		b = appendLen(b, len(t.Partitions))
		for _, p := range t.Partitions {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
		return b
	})
}

func (r *reader) topicPartitions() []consumerTopicPartitions {
	return readStructs(r, 16+1+1, func(r *reader) consumerTopicPartitions {
		t := consumerTopicPartitions{TopicID: r.uuid()}
		np := r.arrayLen(4)
		t.Partitions = make([]int32, 0, np)
		for j := 0; j < np && r.err == nil; j++ {
			t.Partitions = append(t.Partitions, r.int32())
		}
		return t
	})
}

// consumerTargetMemberValue is ConsumerGroupTargetAssignmentMemberValue v0:
// a member's target assignment.
type consumerTargetMemberValue struct {
	TopicPartitions []consumerTopicPartitions
}

func (v *consumerTargetMemberValue) AppendTo(b []byte) []byte {
	return appendValue(b, nil, func(b []byte) []byte {
		return appendTopicPartitions(b, v.TopicPartitions)
	})
}

func (v *consumerTargetMemberValue) ReadFrom(src []byte) error {
	return readValue(src, "ConsumerGroupTargetAssignmentMemberValue", nil, func(r *reader) {
		v.TopicPartitions = r.topicPartitions()
	})
}

// consumerCurrentAssignmentValue is ConsumerGroupCurrentMemberAssignmentValue
// v0: a member's epochs and the partitions it owns.
type consumerCurrentAssignmentValue struct {
	MemberEpoch                 int32
	PreviousMemberEpoch         int32
	State                       int8
	AssignedPartitions          []consumerTopicPartitions
	PartitionsPendingRevocation []consumerTopicPartitions
}

func (v *consumerCurrentAssignmentValue) AppendTo(b []byte) []byte {
	return appendValue(b, nil, func(b []byte) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(v.MemberEpoch))
		b = binary.BigEndian.AppendUint32(b, uint32(v.PreviousMemberEpoch))
		b = append(b, byte(v.State))
		b = appendTopicPartitions(b, v.AssignedPartitions)
		return appendTopicPartitions(b, v.PartitionsPendingRevocation)
	})
}

func (v *consumerCurrentAssignmentValue) ReadFrom(src []byte) error {
	return readValue(src, "ConsumerGroupCurrentMemberAssignmentValue", nil, func(r *reader) {
		v.MemberEpoch = r.int32()
		v.PreviousMemberEpoch = r.int32()
		v.State = r.int8()
		v.AssignedPartitions = r.topicPartitions()
		v.PartitionsPendingRevocation = r.topicPartitions()
	})
}

// Value framing: every KIP-848 value is its version (an int16, always 0),
// its fields and a tagged-field section.

// appendValue appends a value: the version, what fields appends and the
// tagged fields tags.
func appendValue(b []byte, tags []tagged, fields func(b []byte) []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(consumerRecordValueVersion))
	b = fields(b)
	return appendTags(b, tags)
}

// readValue decodes a value framed as appendValue writes it: fields reads
// the fields, known receives the tagged fields (nil: skip them all), and
// the error names the value what.
func readValue(src []byte, what string, known func(tag uint32, data []byte) error, fields func(r *reader)) error {
	r := reader{b: src}
	r.version()
	fields(&r)
	r.tags(known)
	return r.done(what)
}

// appendStructs appends a compact array of structs, each followed by its
// (empty) tagged-field section.
func appendStructs[T any](b []byte, xs []T, elem func(b []byte, x T) []byte) []byte {
	b = appendLen(b, len(xs))
	for _, x := range xs {
		b = elem(b, x)
		b = appendTags(b, nil)
	}
	return b
}

// readStructs reads a compact array of structs written by appendStructs;
// min is the smallest encoding of one element.
func readStructs[T any](r *reader, min int, elem func(r *reader) T) []T {
	n := r.arrayLen(min)
	out := make([]T, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		x := elem(r)
		r.tags(nil)
		out = append(out, x)
	}
	return out
}

func appendCompactStrings(b []byte, ss []string) []byte {
	b = appendLen(b, len(ss))
	for _, s := range ss {
		b = appendCompactString(b, s)
	}
	return b
}

func (r *reader) compactStrings() []string {
	n := r.arrayLen(1)
	out := make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.compactString())
	}
	return out
}

// Encoding helpers (Kafka's protocol primitives).

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendLen(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)+1) }

func appendCompactString(b []byte, s string) []byte {
	b = appendLen(b, len(s))
	return append(b, s...)
}

func appendCompactNullableString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, 0)
	}
	return appendCompactString(b, *s)
}

// tagged is one tagged field: its tag and encoded value.
type tagged struct {
	tag  uint32
	data []byte
}

// appendTags appends a tagged-field section (tags in increasing order).
func appendTags(b []byte, tags []tagged) []byte {
	b = binary.AppendUvarint(b, uint64(len(tags)))
	for _, t := range tags {
		b = binary.AppendUvarint(b, uint64(t.tag))
		b = binary.AppendUvarint(b, uint64(len(t.data)))
		b = append(b, t.data...)
	}
	return b
}

var errShort = errors.New("truncated")

// reader decodes Kafka's primitives; the first error sticks and later
// reads return zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.fail(errShort)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) int8() int8 {
	if b := r.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *reader) int16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) int32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) uuid() (id [16]byte) {
	if b := r.take(16); b != nil {
		copy(id[:], b)
	}
	return id
}

// version reads a value's version: only 0 exists for these records.
func (r *reader) version() {
	if v := r.int16(); r.err == nil && v != consumerRecordValueVersion {
		r.fail(fmt.Errorf("unknown value version %d", v))
	}
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errShort)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// string reads a non-flexible (int16 length) string.
func (r *reader) string() string {
	n := r.int16()
	if n < 0 {
		r.fail(fmt.Errorf("null string in a key"))
		return ""
	}
	return string(r.take(int(n)))
}

// compactLen reads a compact length: -1 for null.
func (r *reader) compactLen() int {
	v := r.uvarint()
	if v > math.MaxInt32 {
		r.fail(fmt.Errorf("length %d too large", v))
		return 0
	}
	return int(v) - 1
}

func (r *reader) compactString() string {
	n := r.compactLen()
	if n < 0 {
		r.fail(errors.New("null in a non-nullable string"))
		return ""
	}
	return string(r.take(n))
}

func (r *reader) compactNullableString() *string {
	n := r.compactLen()
	if n < 0 || r.err != nil {
		return nil
	}
	s := string(r.take(n))
	return &s
}

// arrayLen reads a non-nullable compact array length; min is the smallest
// encoding of one element, bounding the length by the bytes left.
func (r *reader) arrayLen(min int) int {
	n := r.compactLen()
	switch {
	case r.err != nil:
		return 0
	case n < 0:
		r.fail(errors.New("null in a non-nullable array"))
		return 0
	case n*min > len(r.b):
		r.fail(errShort)
		return 0
	}
	return n
}

// tags reads a tagged-field section, handing each field to fn (nil:
// skip every field).
func (r *reader) tags(fn func(tag uint32, data []byte) error) {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail(errShort)
		return
	}
	last := int64(-1)
	for i := uint64(0); i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if tag > math.MaxUint32 || int64(tag) <= last {
			r.fail(fmt.Errorf("tag %d out of order", tag))
			return
		}
		last = int64(tag)
		if size > uint64(len(r.b)) {
			r.fail(errShort)
			return
		}
		data := r.take(int(size))
		if fn != nil && r.err == nil {
			if err := fn(uint32(tag), data); err != nil {
				r.fail(err)
			}
		}
	}
}

// done reports the first error, or trailing bytes.
func (r *reader) done(what string) error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("decode %s: %w", what, r.err)
	}
	return nil
}
