package record

import "github.com/klauspost/compress/snappy"

func snappyEncodeRaw(raw []byte) []byte { return snappy.Encode(nil, raw) }

// fataler is the part of testing.TB that *rapid.T also has.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}
