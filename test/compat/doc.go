// Package compat holds Strata's real-client integration suite: every test
// starts a real Strata broker in-process and drives it with unmodified Kafka
// clients (IBM/sarama and segmentio/kafka-go in-process; kcat, Python
// confluent-kafka, kafka-python and Node kafkajs as child processes) through
// the same data-driven scenarios.
//
// Run it with `go test ./test/compat/`. Missing external tools skip their
// tests loudly, or fail them when CI is set. STRATA_COMPAT_TARGET=kfake runs
// the suite against franz-go's kfake instead (only for developing the suite).
package compat
