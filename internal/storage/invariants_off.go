//go:build !invariants

package storage

// invariantsEnabled is false without the invariants build tag: the checks
// compile to nothing.
const invariantsEnabled = false
