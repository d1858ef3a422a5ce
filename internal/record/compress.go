package record

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kerr"
)

// MaxDecompressedSize caps the output of Decompress, so a small malicious
// batch (a "zip bomb") cannot make the broker allocate without bound. It is
// far above any sane max.message.bytes. No ratio limit is applied: real
// producers send zero-filled or repetitive payloads that compress by more
// than 1000x, which a ratio cap would wrongly reject.
const MaxDecompressedSize = 64 << 20

// Codec state. All of it is either immutable after construction or safe for
// concurrent use: zstd's Decoder.DecodeAll and Encoder.EncodeAll are
// documented as concurrency safe, and the sync.Pools hold writers that are
// Reset before every use. None of it owns goroutines (the zstd codecs are
// only used through the *All methods, which do not start any).
var (
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(MaxDecompressedSize))
	})
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	})
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Writers  = sync.Pool{New: func() any { return lz4.NewWriter(nil) }}
	gzipReaders sync.Pool // *gzip.Reader; a zero Reader cannot be Reset, so New is nil
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
)

// xerialMagic opens the snappy-java stream framing used by the Java client;
// it is followed by version (1) and min compatible version (1), int32 each.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	xerialBlockSize  = 32 << 10 // snappy-java's default block size
)

// Compress and Decompress implement the codecs with Kafka's framing
// (gzip, snappy in xerial framing when reading, lz4 frame, zstd).
// Compress writes snappy in xerial framing (32 KiB blocks) like the Java
// client, and lz4 frames with 64 KiB independent blocks and no content
// checksum like Kafka's KafkaLZ4BlockOutputStream.
func Compress(c Compression, raw []byte) ([]byte, error) {
	switch c {
	case None:
		return raw, nil
	case Gzip:
		var buf bytes.Buffer
		w := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(w)
		w.Reset(&buf)
		if _, err := w.Write(raw); err != nil {
			return nil, fmt.Errorf("gzip compress: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("gzip compress: %w", err)
		}
		return buf.Bytes(), nil
	case Snappy:
		return xerialEncode(raw), nil
	case LZ4:
		var buf bytes.Buffer
		w := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(w)
		w.Reset(&buf)
		if err := w.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false)); err != nil {
			return nil, fmt.Errorf("lz4 compress: %w", err)
		}
		if _, err := w.Write(raw); err != nil {
			return nil, fmt.Errorf("lz4 compress: %w", err)
		}
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("lz4 compress: %w", err)
		}
		return buf.Bytes(), nil
	case Zstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("zstd compress: %w", err)
		}
		return enc.EncodeAll(raw, nil), nil
	}
	return nil, fmt.Errorf("compress: unknown compression codec %d: %w", c, kerr.CorruptMessage)
}

// Decompress reverses Compress for any codec. It accepts snappy both raw and
// in xerial framing, and refuses output above MaxDecompressedSize. Errors
// wrap kerr.CorruptMessage.
func Decompress(c Compression, data []byte) ([]byte, error) {
	var out []byte
	var err error
	switch c {
	case None:
		return data, nil
	case Gzip:
		out, err = gunzip(data)
	case Snappy:
		out, err = snappyDecode(data)
	case LZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		r.Reset(bytes.NewReader(data))
		out, err = readCapped(r, len(data))
		r.Reset(nil)
		lz4Readers.Put(r)
	case Zstd:
		var dec *zstd.Decoder
		if dec, err = zstdDecoder(); err == nil {
			out, err = dec.DecodeAll(data, nil)
		}
	default:
		err = fmt.Errorf("unknown compression codec %d", c)
	}
	if err == nil && len(out) > MaxDecompressedSize {
		err = fmt.Errorf("output exceeds %d bytes", MaxDecompressedSize)
	}
	if err != nil {
		return nil, fmt.Errorf("record: decompress %s: %v: %w", c, err, kerr.CorruptMessage)
	}
	return out, nil
}

// gunzip decompresses gzip data (all members) with a pooled reader.
func gunzip(data []byte) ([]byte, error) {
	var r *gzip.Reader
	if v := gzipReaders.Get(); v != nil {
		r = v.(*gzip.Reader)
		if err := r.Reset(bytes.NewReader(data)); err != nil {
			return nil, err
		}
	} else {
		var err error
		if r, err = gzip.NewReader(bytes.NewReader(data)); err != nil {
			return nil, err
		}
	}
	out, err := readCapped(r, len(data))
	gzipReaders.Put(r)
	return out, err
}

// readCapped reads r to the end, failing beyond MaxDecompressedSize.
// inLen, the compressed size, sizes the first buffer.
func readCapped(r io.Reader, inLen int) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(4*inLen+512, MaxDecompressedSize)))
	if _, err := buf.ReadFrom(io.LimitReader(r, MaxDecompressedSize+1)); err != nil {
		return nil, err
	}
	if buf.Len() > MaxDecompressedSize {
		return nil, fmt.Errorf("output exceeds %d bytes", MaxDecompressedSize)
	}
	return buf.Bytes(), nil
}

// xerialEncode frames raw the way snappy-java's SnappyOutputStream does:
// the 16-byte header, then per block a big-endian int32 length and a raw
// snappy block of at most xerialBlockSize input bytes.
func xerialEncode(raw []byte) []byte {
	out := make([]byte, 0, xerialHeaderSize+snappy.MaxEncodedLen(len(raw))+4*(len(raw)/xerialBlockSize+1))
	out = append(out, xerialMagic...)
	out = be.AppendUint32(out, 1)
	out = be.AppendUint32(out, 1)
	for len(raw) > 0 {
		n := min(len(raw), xerialBlockSize)
		lenPos := len(out)
		out = append(out, 0, 0, 0, 0)
		block := snappy.Encode(out[len(out):cap(out)], raw[:n])
		be.PutUint32(out[lenPos:], uint32(len(block)))
		out = append(out, block...)
		raw = raw[n:]
	}
	return out
}

// snappyDecode decodes a raw snappy block or a xerial-framed stream.
func snappyDecode(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialMagic) {
		return snappyBlock(nil, data)
	}
	if len(data) < xerialHeaderSize {
		return nil, fmt.Errorf("xerial header truncated")
	}
	var out []byte
	p := xerialHeaderSize
	for p < len(data) {
		if len(data)-p < 4 {
			return nil, fmt.Errorf("xerial block length truncated at byte %d", p)
		}
		n := int(be.Uint32(data[p:]))
		p += 4
		if n > len(data)-p {
			return nil, fmt.Errorf("xerial block of %d bytes at byte %d, only %d left", n, p, len(data)-p)
		}
		var err error
		if out, err = snappyBlock(out, data[p:p+n]); err != nil {
			return nil, err
		}
		p += n
	}
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to dst, checking
// the declared length against MaxDecompressedSize before allocating.
func snappyBlock(dst, block []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > MaxDecompressedSize-len(dst) {
		return nil, fmt.Errorf("output exceeds %d bytes", MaxDecompressedSize)
	}
	// No snappy element yields more than 64 bytes per 3 bytes of input (a
	// copy with a 2-byte offset; literals yield what they hold): a larger
	// declared length is a lie, refused before it is allocated (a 4-byte
	// block declaring 36 MB held the cleaner's filter for seconds;
	// FuzzFilterControl).
	if int64(n)*3 > int64(len(block))*64 {
		return nil, fmt.Errorf("snappy block of %d bytes declares %d decoded bytes, more than the format can expand to", len(block), n)
	}
	dst = append(dst, make([]byte, n)...)
	got, err := snappy.Decode(dst[len(dst)-n:], block)
	if err != nil {
		return nil, err
	}
	if len(got) != n {
		return nil, fmt.Errorf("snappy block decoded to %d bytes, declared %d", len(got), n)
	}
	return dst, nil
}
