// Package compat holds Strata's real-client integration suite: every test
// starts a real Strata broker in-process (server.New on a temporary log
// directory, random port) and drives it with unmodified Kafka clients:
// IBM/sarama and segmentio/kafka-go in-process; kcat, Python
// confluent-kafka, kafka-python and Node kafkajs as child processes.
//
// The scenarios are data-driven (scenario_test.go): each client is a Client
// whose operations (create_topic, produce, fetch, offset_for_time, ...) take
// an Op and return a Result, so every client runs the same checks and a
// client that lacks an operation skips just that scenario. Process clients
// run a driver script per operation: python/confluent_driver.py,
// python/kafkapython_driver.py and node/driver.js read one Op as JSON on
// stdin and print one Result as JSON; their "versions" operation reports
// client versions, supported operations and codecs. For consumer groups the
// same scripts run as long-lived members (--member '<op json>'), streaming
// {"event": "assigned"|"record"|"closed"} lines until told "stop" on stdin.
//
// Run it with `go test ./test/compat/`. It needs kcat,
// python3-confluent-kafka, python3-kafka (+ python3-snappy, python3-lz4,
// python3-zstandard), nodejs and `npm ci --prefix test/compat/node`. A
// missing client skips its tests loudly, or fails them when CI is set.
// STRATA_COMPAT_TARGET=kfake runs the suite against franz-go's kfake instead
// (only for developing the suite: kfake deviates from Kafka in places).
package compat
