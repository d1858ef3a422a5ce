package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/strata-io/strata/internal/record"
)

// How a KIP-848 group is stored (Kafka's GroupMetadataManager): its state
// is the set of live consumer group records in __consumer_offsets (types
// 3-8, records848.go), one per key: the group epoch, the subscribed
// topics' metadata, the target assignment epoch, and per member its
// subscription, its target assignment and its current assignment (member
// epoch, owned partitions, partitions pending revocation). A change
// writes, in one batch with the group's lock held, the tombstones of the
// keys that are gone and then the records whose value changed, in Kafka's
// order (a removed member's current assignment, target assignment and
// subscription tombstones first; then subscriptions, partition metadata,
// group epoch, target assignments, assignment epoch, current
// assignments); the request that caused it is answered once the batch is
// durable (Kafka's CoordinatorRuntime answers a write once the high
// watermark passes it). A new coordinator rebuilds the group from the
// latest record of each key (restoreConsumer) and restarts every member's
// session timer and, for members that still owe revocations, the
// rebalance timer (GroupMetadataManager.onLoaded), so members keep their
// ids, epochs and assignments through a coordinator move. Because only the
// latest record of a key matters, compaction (which keeps exactly that,
// then drops tombstones) loads the same group.

// storedRecord is a consumer group record known durable: its value (nil
// for a tombstone) and the sequence number of the write that stored it.
type storedRecord struct {
	value []byte
	seq   uint64
}

// consumerRecordType is the record type of a consumer group record key.
func consumerRecordType(key string) int16 {
	if len(key) < 2 {
		return -1
	}
	return int16(binary.BigEndian.Uint16([]byte(key[:2])))
}

// upsertRank orders changed records as Kafka's GroupMetadataManager writes
// them within one heartbeat.
func upsertRank(t int16) int {
	switch t {
	case recConsumerGroupMemberMetadata:
		return 0
	case recConsumerGroupPartitionMetadata:
		return 1
	case recConsumerGroupMetadata:
		return 2
	case recConsumerGroupTargetMember:
		return 3
	case recConsumerGroupTargetAssignment:
		return 4
	}
	return 5 // current assignments last
}

// encodeAssignment groups a partition set by topic id, topics and
// partitions sorted; partitions of topics not in ix (deleted) are left out.
func encodeAssignment(s tpset, ix topicIndex) []consumerTopicPartitions {
	out := []consumerTopicPartitions{}
	for _, k := range s.sorted() {
		ti, ok := ix.byName[k.topic]
		if !ok {
			continue
		}
		n := len(out)
		if n == 0 || out[n-1].TopicID != ti.ID {
			out = append(out, consumerTopicPartitions{TopicID: ti.ID, Partitions: []int32{}})
			n++
		}
		out[n-1].Partitions = append(out[n-1].Partitions, k.partition)
	}
	return out
}

// decodeAssignment is encodeAssignment's inverse; topic ids not in ix
// (deleted meanwhile) are dropped.
func decodeAssignment(ts []consumerTopicPartitions, ix topicIndex) tpset {
	out := tpset{}
	for _, t := range ts {
		name, ok := ix.byID[t.TopicID]
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			out[tp{name, p}] = struct{}{}
		}
	}
	return out
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// consumerRecords returns the records that describe g's KIP-848 state, by
// key (g.mu held).
func (g *group) consumerRecords() map[string][]byte {
	out := map[string][]byte{}
	cg := g.consumer
	if cg == nil {
		return out
	}
	g.putGroupRecords(out)
	for id := range cg.members {
		g.putMemberRecords(out, id)
	}
	return out
}

// putConsumerRecord encodes one consumer group record into out by key.
func (g *group) putConsumerRecord(out map[string][]byte, t int16, member string, v interface{ AppendTo([]byte) []byte }) {
	out[string(consumerKey{Type: t, Group: g.id, Member: member}.AppendTo(nil))] = v.AppendTo(nil)
}

// putGroupRecords encodes the group-level records (group epoch, partition
// metadata, assignment epoch) into out.
func (g *group) putGroupRecords(out map[string][]byte) {
	cg := g.consumer
	g.putConsumerRecord(out, recConsumerGroupMetadata, "", &consumerGroupMetadataValue{Epoch: cg.epoch, CreationTimeMs: -1})
	meta := cg.meta
	if meta == nil {
		meta = []consumerTopicMetadata{}
	}
	g.putConsumerRecord(out, recConsumerGroupPartitionMetadata, "", &consumerPartitionMetadataValue{Topics: meta})
	g.putConsumerRecord(out, recConsumerGroupTargetAssignment, "", &consumerTargetAssignmentMetadataValue{AssignmentEpoch: cg.assignmentEpoch})
}

// putMemberRecords encodes member id's three records (subscription, target
// assignment, current assignment) into out; nothing for a member that is
// gone.
func (g *group) putMemberRecords(out map[string][]byte, id string) {
	cg := g.consumer
	m := cg.members[id]
	if m == nil {
		return
	}
	rt := int32(-1)
	if m.rebalanceTimeout > 0 {
		rt = int32(m.rebalanceTimeout.Milliseconds())
	}
	topics := m.topics
	if topics == nil {
		topics = []string{}
	}
	g.putConsumerRecord(out, recConsumerGroupMemberMetadata, id, &consumerMemberMetadataValue{
		InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
		SubscribedTopicNames: topics, SubscribedTopicRegex: optString(m.regex),
		RebalanceTimeoutMs: rt, ServerAssignor: optString(m.assignor),
	})
	target := cg.target[id]
	g.putConsumerRecord(out, recConsumerGroupTargetMember, id, &consumerTargetMemberValue{TopicPartitions: encodeAssignment(target, cg.tops)})
	owned, revoking := tpset{}, tpset{}
	for k := range m.assigned {
		if target.has(k) {
			owned[k] = struct{}{}
		} else {
			revoking[k] = struct{}{}
		}
	}
	cur := &consumerCurrentAssignmentValue{
		MemberEpoch: m.epoch, PreviousMemberEpoch: m.prevEpoch, State: memberStateStable,
		AssignedPartitions:          encodeAssignment(owned, cg.tops),
		PartitionsPendingRevocation: encodeAssignment(revoking, cg.tops),
	}
	switch {
	case len(revoking) > 0:
		cur.State = memberStateUnrevokedPartitions
	case !subset(target, m.assigned):
		cur.State = memberStateUnreleasedPartitions
	}
	g.putConsumerRecord(out, recConsumerGroupCurrentAssignment, id, cur)
}

// memberRecordKeys are the keys of member id's three records.
func (g *group) memberRecordKeys(id string) [3]string {
	return [3]string{
		string(consumerKey{Type: recConsumerGroupMemberMetadata, Group: g.id, Member: id}.AppendTo(nil)),
		string(consumerKey{Type: recConsumerGroupTargetMember, Group: g.id, Member: id}.AppendTo(nil)),
		string(consumerKey{Type: recConsumerGroupCurrentAssignment, Group: g.id, Member: id}.AppendTo(nil)),
	}
}

// consumerChangesLocked returns the records that bring the stored KIP-848
// state of g to its state now (g.mu held; gone: the group is being
// deleted, every record is tombstoned) and notes them as written.
func (g *group) consumerChangesLocked(gone bool) []record.Record {
	desired := map[string][]byte{}
	var tomb, up []string
	if cg := g.consumer; !gone && cg != nil && !cg.changedAll {
		// Only the members marked changed (consumerGroup.changed) can
		// have new records, as in Kafka, which writes the records of what
		// a heartbeat changed: encode the group-level records and theirs.
		g.putGroupRecords(desired)
		for id := range cg.changed {
			g.putMemberRecords(desired, id)
			for _, k := range g.memberRecordKeys(id) {
				if _, ok := desired[k]; !ok && g.cwritten[k] != nil {
					tomb = append(tomb, k)
				}
			}
		}
	} else {
		if !gone {
			desired = g.consumerRecords()
		}
		for k := range g.cwritten {
			if _, ok := desired[k]; !ok {
				tomb = append(tomb, k)
			}
		}
	}
	if cg := g.consumer; cg != nil {
		clear(cg.changed)
		cg.changedAll = false
	}
	for k, v := range desired {
		if old, ok := g.cwritten[k]; !ok || !bytes.Equal(old, v) {
			up = append(up, k)
		}
	}
	if len(tomb) == 0 && len(up) == 0 {
		return nil
	}
	// Tombstones in decreasing record type: a member's current assignment,
	// target assignment, then subscription; for a deleted group the
	// assignment epoch, partition metadata and group epoch after them
	// (Kafka's removeMember and ConsumerGroup.createGroupTombstoneRecords).
	sort.Slice(tomb, func(i, j int) bool {
		ti, tj := consumerRecordType(tomb[i]), consumerRecordType(tomb[j])
		if ti != tj {
			return ti > tj
		}
		return tomb[i] < tomb[j]
	})
	sort.Slice(up, func(i, j int) bool {
		ri, rj := upsertRank(consumerRecordType(up[i])), upsertRank(consumerRecordType(up[j]))
		if ri != rj {
			return ri < rj
		}
		return up[i] < up[j]
	})
	if g.cwritten == nil {
		g.cwritten = map[string][]byte{}
	}
	recs := make([]record.Record, 0, len(tomb)+len(up))
	for _, k := range tomb {
		recs = append(recs, record.Record{Key: []byte(k)})
		delete(g.cwritten, k)
	}
	for _, k := range up {
		recs = append(recs, record.Record{Key: []byte(k), Value: desired[k]})
		g.cwritten[k] = desired[k]
	}
	return recs
}

// settleConsumer records the consumer group records of a durable write
// (g.mu held); a later write's record of a key wins over an earlier one
// whatever order their completions arrive in.
func (g *group) settleConsumer(recs []record.Record, seq uint64) {
	if len(recs) == 0 {
		return
	}
	if g.cstored == nil {
		g.cstored = map[string]storedRecord{}
	}
	for _, r := range recs {
		k := string(r.Key)
		if cur, ok := g.cstored[k]; ok && cur.seq > seq {
			continue
		}
		g.cstored[k] = storedRecord{value: r.Value, seq: seq}
	}
}

// storedConsumerRecords returns the durable live consumer group records.
func (g *group) storedConsumerRecords() map[string][]byte {
	out := map[string][]byte{}
	for k, r := range g.cstored {
		if r.value != nil {
			out[k] = r.value
		}
	}
	return out
}

// consumerTombstones returns the tombstones of every consumer group record
// written for g, in Kafka's order (see consumerChangesLocked).
func (g *group) consumerTombstones() []record.Record {
	saved := g.cwritten
	g.cwritten = map[string][]byte{}
	for k, v := range saved {
		g.cwritten[k] = v
	}
	recs := g.consumerChangesLocked(true)
	g.cwritten = saved
	return recs
}

// restoreConsumer rebuilds g's KIP-848 state from its live consumer group
// records (g.mu held or g not yet shared), resolving topic ids with ix:
// members keep their ids, epochs, subscriptions and assignments, and their
// session timers (session) start now, with a rebalance timer for members
// that still owe revocations (Kafka's GroupMetadataManager.onLoaded). It
// returns an error for a record that does not decode (replay checked
// them).
func (g *group) restoreConsumer(recs map[string][]byte, ix topicIndex, session time.Duration) error {
	g.stopConsumerTimers()
	g.consumer = nil
	g.cwritten = make(map[string][]byte, len(recs))
	for k, v := range recs {
		g.cwritten[k] = v
	}
	if len(recs) == 0 {
		return nil
	}
	cg := newConsumerGroup()
	cg.tops = ix
	// The next write compares every record with what the log holds (a
	// target without its member, say, is tombstoned then).
	cg.changedAll = true
	get := func(id string) *cmember {
		m := cg.members[id]
		if m == nil {
			m = &cmember{id: id, assigned: tpset{}}
			cg.members[id] = m
		}
		return m
	}
	targets := map[string]tpset{}
	for k, v := range recs {
		var key consumerKey
		if err := key.ReadFrom([]byte(k)); err != nil {
			return err
		}
		switch key.Type {
		case recConsumerGroupMetadata:
			var mv consumerGroupMetadataValue
			if err := mv.ReadFrom(v); err != nil {
				return err
			}
			cg.epoch = mv.Epoch
		case recConsumerGroupPartitionMetadata:
			var pv consumerPartitionMetadataValue
			if err := pv.ReadFrom(v); err != nil {
				return err
			}
			cg.meta = pv.Topics
			cg.metaKey = metaKeyOf(pv.Topics)
		case recConsumerGroupTargetAssignment:
			var av consumerTargetAssignmentMetadataValue
			if err := av.ReadFrom(v); err != nil {
				return err
			}
			cg.assignmentEpoch = av.AssignmentEpoch
		case recConsumerGroupMemberMetadata:
			var mv consumerMemberMetadataValue
			if err := mv.ReadFrom(v); err != nil {
				return err
			}
			m := get(key.Member)
			m.instanceID, m.rackID, m.clientID, m.clientHost = mv.InstanceID, mv.RackID, mv.ClientID, mv.ClientHost
			m.topics = append([]string(nil), mv.SubscribedTopicNames...)
			sort.Strings(m.topics)
			if mv.SubscribedTopicRegex != nil {
				m.regex = *mv.SubscribedTopicRegex
			}
			if mv.RebalanceTimeoutMs > 0 {
				m.rebalanceTimeout = time.Duration(mv.RebalanceTimeoutMs) * time.Millisecond
			}
			if mv.ServerAssignor != nil {
				m.assignor = *mv.ServerAssignor
			}
		case recConsumerGroupTargetMember:
			var tv consumerTargetMemberValue
			if err := tv.ReadFrom(v); err != nil {
				return err
			}
			targets[key.Member] = decodeAssignment(tv.TopicPartitions, ix)
		case recConsumerGroupCurrentAssignment:
			var cv consumerCurrentAssignmentValue
			if err := cv.ReadFrom(v); err != nil {
				return err
			}
			m := get(key.Member)
			// A static member that left temporarily is at epoch -2 with
			// its previous epoch, as Kafka writes and replays it.
			m.epoch, m.prevEpoch = cv.MemberEpoch, cv.PreviousMemberEpoch
			m.assigned = decodeAssignment(cv.AssignedPartitions, ix)
			for k := range decodeAssignment(cv.PartitionsPendingRevocation, ix) {
				m.assigned[k] = struct{}{}
			}
		}
	}
	for id, t := range targets {
		if cg.members[id] != nil {
			cg.target[id] = t // a target without its member is tombstoned by the next write
		}
	}
	g.consumer = cg
	g.protocolType = "consumer"
	for id, m := range cg.members {
		if m.instanceID != nil {
			cg.static[*m.instanceID] = id
		}
		// The member is taken to still own every partition it was
		// assigned until it reports otherwise.
		m.owned = m.assigned.clone()
		g.consumerSession(m, session)
		for k := range m.assigned {
			if !cg.target[id].has(k) {
				g.armRevokeTimer(m)
				break
			}
		}
	}
	g.syncConsumerState()
	return nil
}

// validConsumerRecord checks that a consumer group record decodes (key
// and, unless a tombstone, value) and returns its key.
func validConsumerRecord(key, value []byte) (consumerKey, error) {
	var k consumerKey
	if err := k.ReadFrom(key); err != nil {
		return k, err
	}
	if value == nil {
		return k, nil
	}
	var err error
	switch k.Type {
	case recConsumerGroupMetadata:
		err = new(consumerGroupMetadataValue).ReadFrom(value)
	case recConsumerGroupPartitionMetadata:
		err = new(consumerPartitionMetadataValue).ReadFrom(value)
	case recConsumerGroupMemberMetadata:
		err = new(consumerMemberMetadataValue).ReadFrom(value)
	case recConsumerGroupTargetAssignment:
		err = new(consumerTargetAssignmentMetadataValue).ReadFrom(value)
	case recConsumerGroupTargetMember:
		err = new(consumerTargetMemberValue).ReadFrom(value)
	case recConsumerGroupCurrentAssignment:
		err = new(consumerCurrentAssignmentValue).ReadFrom(value)
	}
	if err != nil {
		return k, fmt.Errorf("group %s: %w", k.Group, err)
	}
	return k, nil
}
