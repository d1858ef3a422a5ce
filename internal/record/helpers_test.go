package record

import "github.com/klauspost/compress/snappy"

func snappyEncodeRaw(raw []byte) []byte { return snappy.Encode(nil, raw) }
