//go:build invariants

package storage

// invariantsEnabled turns on the storage invariant checks (go test -tags
// invariants), as pebble's invariants build tag does.
const invariantsEnabled = true
