// Package group is Strata's consumer group coordinator: Kafka's classic group
// protocol (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
// OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups,
// OffsetDelete) with committed offsets and group metadata persisted as
// Kafka-format records in the compacted __consumer_offsets topic.
//
// Layout: group.go, join.go and sync.go hold the per-group state machine
// (no I/O; time comes from an injected Clock), offsets.go the committed
// offsets and their expiry, persist.go the __consumer_offsets record
// encoding and replay, coordinator.go and handle_*.go the request handlers
// that glue the two together.
package group
