package compat

import (
	"context"
	"fmt"
	"testing"
)

// Rec is one record as every driver reports it. A nil Key is a null key, a
// nil Value a tombstone.
type Rec struct {
	Key       *string `json:"key"`
	Value     *string `json:"value"`
	Timestamp int64   `json:"ts,omitempty"` // ms; 0 = let the client choose
	// Headers are [key, value] pairs in order (keys unique, values non-empty).
	Headers   [][2]string `json:"headers,omitempty"`
	Partition int32       `json:"partition"`
	Offset    int64       `json:"offset"`
}

// Op is one client operation; process drivers receive it as JSON on stdin.
type Op struct {
	Op         string `json:"op"`
	Bootstrap  string `json:"bootstrap"`
	Topic      string `json:"topic,omitempty"`
	Partitions int32  `json:"partitions,omitempty"`
	// ReplicationFactor is create_topic's replication factor (1 when
	// unset).
	ReplicationFactor int16             `json:"replication_factor,omitempty"`
	Configs           map[string]string `json:"configs,omitempty"`
	Records           []Rec             `json:"records,omitempty"`
	Compression       string            `json:"compression,omitempty"`
	Idempotent        bool              `json:"idempotent,omitempty"`
	Partition         int32             `json:"partition"`
	Offset            int64             `json:"offset"`    // fetch start (-2 earliest), delete-records before
	Timestamp         int64             `json:"timestamp"` // offset_for_time
	Max               int               `json:"max,omitempty"`
	Group             string            `json:"group,omitempty"`
	TimeoutMs         int               `json:"timeout_ms,omitempty"`
	// Isolation is "read_committed", "read_uncommitted" or "" (the
	// client's default) for fetch.
	Isolation string `json:"isolation,omitempty"`
	// TransactionalID and Txns drive opTransaction: one producer with this
	// id runs each Txn in turn.
	TransactionalID string `json:"transactional_id,omitempty"`
	Txns            []Txn  `json:"txns,omitempty"`
	// SASL, when set, makes the client authenticate (drivers that support
	// it: kafkajs, confluent-kafka-python; sarama with PLAIN).
	SASL *SASLAuth `json:"sasl,omitempty"`
}

// SASLAuth is a client's SASL mechanism (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512) and credentials.
type SASLAuth struct {
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	Password  string `json:"password"`
}

// Txn is one transaction of opTransaction: produce Records to Op.Topic
// (each at its Rec.Partition), optionally add the offset OffsetTopic /
// OffsetPartition / Offset for Group (sendOffsetsToTransaction), then
// commit, or abort when Abort is set.
type Txn struct {
	Records         []Rec  `json:"records,omitempty"`
	Group           string `json:"group,omitempty"`
	OffsetTopic     string `json:"offset_topic,omitempty"`
	OffsetPartition int32  `json:"offset_partition"`
	Offset          int64  `json:"offset"`
	Abort           bool   `json:"abort,omitempty"`
}

// Result is what a driver returns for an Op. ErrorCode is Kafka's error code
// (0 = success, -1 = a client-side error with no Kafka code).
type Result struct {
	ErrorCode int16             `json:"error_code"`
	Error     string            `json:"error,omitempty"`
	Offsets   []int64           `json:"offsets,omitempty"`
	Records   []Rec             `json:"records,omitempty"`
	Topics    []string          `json:"topics,omitempty"`
	Configs   map[string]string `json:"configs,omitempty"`
	Offset    int64             `json:"offset"`
	Low       int64             `json:"low"`
	High      int64             `json:"high"`
	Versions  map[string]string `json:"versions,omitempty"`
	Codecs    []string          `json:"codecs,omitempty"`
}

// Operation names a driver may support.
const (
	opCreate        = "create_topic"
	opList          = "list_topics"
	opDescribe      = "describe_configs"
	opAlterIncr     = "alter_configs_incremental"
	opAlterLegacy   = "alter_configs_legacy"
	opDeleteRecords = "delete_records"
	opDeleteTopic   = "delete_topic"
	opProduce       = "produce"
	opFetch         = "fetch"
	opOffsetForTime = "offset_for_time"
	opWatermarks    = "watermarks"
	opIdempotent    = "idempotent" // produce with Idempotent=true
	opTimestamps    = "timestamps" // produce honours Rec.Timestamp
	opGroupConsume  = "group_consume"
	opVersions      = "versions"
	opLogAppendTime = "log_append_time" // fetch reports LogAppendTime batches' broker time
	opHeaders       = "headers"         // produce sets per-record headers
	opNullRecord    = "null_record"     // produce sends a record with null key and null value
	opTransaction   = "transaction"     // transactional producer (see Txn)
	opIsolation     = "isolation"       // fetch honours Op.Isolation
)

// Client is one Kafka client under test.
type Client struct {
	Name     string
	Supports map[string]bool
	Codecs   []string
	Versions map[string]string
	// Librdkafka marks clients built on librdkafka (kcat, confluent-kafka).
	Librdkafka bool
	// argv and dir run the driver script (process clients only).
	argv []string
	dir  string
	do   func(ctx context.Context, op Op) Result
}

// Do runs op against the broker at bootstrap.
func (c *Client) Do(t testing.TB, bootstrap string, op Op) Result {
	t.Helper()
	op.Bootstrap = bootstrap
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return c.do(ctx, op)
}

// Must runs op and fails the test unless it succeeds.
func (c *Client) Must(t testing.TB, bootstrap string, op Op) Result {
	t.Helper()
	r := c.Do(t, bootstrap, op)
	if r.ErrorCode != 0 {
		t.Fatalf("%s %s %s: error code %d: %s", c.Name, op.Op, op.Topic, r.ErrorCode, r.Error)
	}
	return r
}

func (c *Client) can(op string) bool { return c.Supports[op] }

func strp(s string) *string { return &s }

// replicationFactor is the replication factor create_topic asks for.
func (op Op) replicationFactor() int16 {
	if op.ReplicationFactor > 0 {
		return op.ReplicationFactor
	}
	return 1
}

func (r Rec) String() string {
	f := func(p *string) string {
		if p == nil {
			return "<null>"
		}
		return fmt.Sprintf("%q", *p)
	}
	return fmt.Sprintf("{p%d@%d %s=%s ts=%d h=%v}", r.Partition, r.Offset, f(r.Key), f(r.Value), r.Timestamp, r.Headers)
}
