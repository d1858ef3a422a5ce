// Package logtool inspects Kafka-format log directories offline: it dumps
// segment, offset-index, time-index and transaction-index files (like
// kafka-dump-log) and verifies whole log directories (batch framing, CRCs,
// offset order across segments, index entries against the log). It only
// reads files; it never repairs them.
package logtool
