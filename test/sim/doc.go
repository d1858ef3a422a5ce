// Package sim is a deterministic simulation of one replicated partition:
// the replication state machines of internal/replica (leader: ISR, high
// watermark, acks=all; follower: fetch position, divergence and
// truncation) and the controller's elections (internal/controller
// Reconcile) are driven, through their public APIs only, by a seeded
// discrete-event scheduler with a simulated clock and a simulated network
// that delays, drops, duplicates and reorders every message (produce,
// fetch, ISR change, metadata, heartbeat) and can cut any path; brokers
// crash (process death, or power loss dropping what was not fsynced),
// pause and restart; the metadata store can lose its quorum. Invariants
// are checked after every event. The code is in the tests
// (sim_test.go); docs/reliability.md says what it covers and what not.
package sim
