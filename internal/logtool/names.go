package logtool

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
)

// File extensions of a partition directory (Kafka's LogFileUtils).
const (
	ExtLog       = ".log"
	ExtIndex     = ".index"
	ExtTimeIndex = ".timeindex"
	ExtTxnIndex  = ".txnindex"
)

// segmentName matches Kafka's 20-digit zero-padded base offset names.
var segmentName = regexp.MustCompile(`^(\d{20})(\.[a-z]+)$`)

// partitionDirName matches `<topic>-<partition>`.
var partitionDirName = regexp.MustCompile(`^(.+)-(\d+)$`)

// ParseSegmentName splits a file name like 00000000000000000042.index into
// its base offset (42) and extension (".index"). ok is false for any other
// name, including suffixed ones (.deleted, .cleaned, .swap).
func ParseSegmentName(name string) (base int64, ext string, ok bool) {
	m := segmentName.FindStringSubmatch(filepath.Base(name))
	if m == nil {
		return 0, "", false
	}
	base, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return base, m[2], true
}

// SegmentFileName returns the file name of a segment file: the base offset
// zero-padded to 20 digits followed by ext.
func SegmentFileName(base int64, ext string) string {
	return fmt.Sprintf("%020d%s", base, ext)
}

// ParsePartitionDir splits `<topic>-<n>` into topic and partition.
func ParsePartitionDir(name string) (topic string, partition int32, ok bool) {
	m := partitionDirName.FindStringSubmatch(name)
	if m == nil {
		return "", 0, false
	}
	p, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return "", 0, false
	}
	return m[1], int32(p), true
}

// siblingPath returns the path of the file of the same segment with ext.
func siblingPath(path, ext string) string {
	dir, name := filepath.Split(path)
	base, _, ok := ParseSegmentName(name)
	if !ok {
		return ""
	}
	return filepath.Join(dir, SegmentFileName(base, ext))
}
