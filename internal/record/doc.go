// Package record holds Kafka's record batch v2 (magic 2) format: zero-copy
// views over batch bytes, validation (sizes, CRC-32C, offsets), record
// decoding, batch building, and the compression codecs (gzip, snappy, lz4,
// zstd). It knows nothing about files, partitions or the network.
package record
