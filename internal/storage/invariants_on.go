//go:build invariants

package storage

// invariantsEnabled turns on the storage invariant checks (go test -tags
// invariants), as pebble's invariants build tag does.
const invariantsEnabled = true

// invCursor is how far the invariants build has checked a log's active
// segment offset index: the segment and its entries checked.
type invCursor struct {
	seg     *segment
	entries int
}

// from is where an incremental check of s starts.
func (c invCursor) from(s *segment) int {
	if s == c.seg {
		return c.entries
	}
	return 0
}

func (c *invCursor) set(s *segment, entries int) { c.seg, c.entries = s, entries }
