//go:build !invariants

package storage

// invariantsEnabled is false without the invariants build tag: the checks
// compile to nothing.
const invariantsEnabled = false

// invCursor takes no space in a Log without the invariants build tag.
type invCursor struct{}

func (invCursor) from(*segment) int  { return 0 }
func (*invCursor) set(*segment, int) {}
