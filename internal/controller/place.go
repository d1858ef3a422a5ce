package controller

import (
	"fmt"
	"sort"

	"github.com/strata-io/strata/internal/meta"
)

// PlacementError is a refused placement with Kafka's error code
// (INVALID_REPLICATION_FACTOR 38, INVALID_REPLICA_ASSIGNMENT 39,
// INVALID_PARTITIONS 37) and message.
type PlacementError struct {
	Code    int16
	Message string
}

func (e *PlacementError) Error() string { return e.Message }

// Kafka error codes placement returns.
const (
	codeInvalidPartitions        int16 = 37
	codeInvalidReplicationFactor int16 = 38
	codeInvalidReplicaAssignment int16 = 39
)

// Place chooses replicas for count new partitions with replication factor
// rf among the live brokers:
//   - leaders (the first replica) go to the brokers leading the fewest
//     partitions, so leadership stays balanced across topics;
//   - each further replica goes to the broker holding the fewest replicas
//     among those on a rack this partition does not use yet (rack-aware
//     spread, as Kafka's StripedReplicaPlacer, KIP-660), then among all;
//   - ties break by broker id, rotated by the partition index, so equal
//     brokers share the work deterministically.
//
// It refuses rf larger than the live brokers with Kafka's
// INVALID_REPLICATION_FACTOR message.
func (s *State) Place(count, rf int) ([][]int32, error) {
	ids := s.BrokerIDs()
	if rf <= 0 {
		return nil, &PlacementError{codeInvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value."}
	}
	if count <= 0 {
		return nil, &PlacementError{codeInvalidPartitions, "Number of partitions was set to an invalid non-positive value."}
	}
	if rf > len(ids) {
		return nil, &PlacementError{codeInvalidReplicationFactor, fmt.Sprintf(
			"Unable to replicate the partition %d time(s): The target replication factor of %d cannot be reached because only %d broker(s) are registered.",
			rf, rf, len(ids))}
	}
	l := s.load()
	out := make([][]int32, count)
	for p := range count {
		rot := func(i int) int { return (i - p%len(ids) + len(ids)) % len(ids) }
		pick := func(score func(id int32) (int, int), exclude map[int32]bool) int32 {
			best := int32(-1)
			var b1, b2, bi int
			for i, id := range ids {
				if exclude[id] {
					continue
				}
				s1, s2 := score(id)
				r := rot(i)
				if best == -1 || s1 < b1 || (s1 == b1 && (s2 < b2 || (s2 == b2 && r < bi))) {
					best, b1, b2, bi = id, s1, s2, r
				}
			}
			return best
		}
		used := map[int32]bool{}
		racks := map[string]bool{}
		leader := pick(func(id int32) (int, int) { return l.leaders[id], l.replicas[id] }, used)
		replicas := []int32{leader}
		used[leader] = true
		racks[s.Brokers[leader].Rack] = true
		for len(replicas) < rf {
			allRacksUsed := true
			for _, id := range ids {
				if !used[id] && !racks[s.Brokers[id].Rack] {
					allRacksUsed = false
				}
			}
			next := pick(func(id int32) (int, int) {
				newRack := 0
				if !allRacksUsed && racks[s.Brokers[id].Rack] {
					newRack = 1
				}
				return newRack, l.replicas[id]
			}, used)
			replicas = append(replicas, next)
			used[next] = true
			racks[s.Brokers[next].Rack] = true
		}
		for _, r := range replicas {
			l.replicas[r]++
		}
		l.leaders[leader]++
		out[p] = replicas
	}
	return out, nil
}

// ValidateAssignment checks an explicit replica_assignment (CreateTopics /
// CreatePartitions) against the live brokers, with Kafka's rules and
// messages (ReplicationControlManager.createTopic, validateManualPartitionAssignment):
// partitions numbered from first without gaps, every partition with the
// same non-zero number of replicas, no broker twice in one partition, and
// every broker registered.
func (s *State) ValidateAssignment(first int32, assignment map[int32][]int32) ([][]int32, error) {
	if len(assignment) == 0 {
		return nil, &PlacementError{codeInvalidReplicaAssignment, "The manual partition assignment is empty."}
	}
	keys := make([]int32, 0, len(assignment))
	for p := range assignment {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := make([][]int32, 0, len(keys))
	rf := -1
	for i, p := range keys {
		if p != first+int32(i) {
			return nil, &PlacementError{codeInvalidReplicaAssignment, fmt.Sprintf(
				"Partitions must be numbered consecutively from %d: partition %d is missing.", first, first+int32(i))}
		}
		reps := assignment[p]
		if len(reps) == 0 {
			return nil, &PlacementError{codeInvalidReplicaAssignment, fmt.Sprintf("The manual partition assignment includes an empty replica list for partition %d.", p)}
		}
		if rf == -1 {
			rf = len(reps)
		} else if len(reps) != rf {
			return nil, &PlacementError{codeInvalidReplicaAssignment, fmt.Sprintf(
				"The manual partition assignment includes the partition %d with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", p, len(reps), rf)}
		}
		seen := map[int32]bool{}
		for _, r := range reps {
			if seen[r] {
				return nil, &PlacementError{codeInvalidReplicaAssignment, fmt.Sprintf(
					"The manual partition assignment includes the partition %d with duplicate replica %d.", p, r)}
			}
			seen[r] = true
			if !s.Live(r) {
				return nil, &PlacementError{codeInvalidReplicaAssignment, fmt.Sprintf(
					"The manual partition assignment includes broker %d, but no broker with that ID is registered.", r)}
			}
		}
		out = append(out, append([]int32(nil), reps...))
	}
	return out, nil
}

// NewPartitions turns replica lists into the initial partition states of
// new partitions: the first replica leads at epoch 0, every replica is in
// the ISR.
func NewPartitions(topic, topicID string, first int32, replicas [][]int32) []Decision {
	out := make([]Decision, len(replicas))
	for i, reps := range replicas {
		out[i] = Decision{
			Topic: topic,
			TP:    meta.TopicPartition{TopicID: topicID, Partition: first + int32(i)},
			New: meta.PartitionState{Replicas: append([]int32(nil), reps...), ISR: append([]int32(nil), reps...),
				Leader: reps[0]},
			Reason: "new partition",
		}
	}
	return out
}
