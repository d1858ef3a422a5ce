package record

import (
	"bytes"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

func snappyEncodeRaw(raw []byte) []byte { return snappy.Encode(nil, raw) }

// fataler is the part of testing.TB that *rapid.T also has.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// zstdStream compresses raw with the streaming encoder, whose frames carry
// no content size, so the decoder's cap is exercised during decoding.
func zstdStream(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
