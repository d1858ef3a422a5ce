package compat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// saramaClient drives IBM/sarama in-process.
func saramaClient() *Client {
	return &Client{
		Name: "sarama",
		Supports: set(opCreate, opList, opDescribe, opAlterIncr, opAlterLegacy, opDeleteRecords,
			opDeleteTopic, opProduce, opFetch, opOffsetForTime, opWatermarks, opIdempotent, opTimestamps, opLogAppendTime, opHeaders, opNullRecord,
			opTransaction, opIsolation, opGroupConsume),
		Codecs:   []string{"none", "gzip", "snappy", "lz4", "zstd"},
		Versions: map[string]string{"sarama": modVersion("github.com/IBM/sarama")},
		do:       saramaDo,
	}
}

func saramaConfig(op Op) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.ClientID = "strata-compat-sarama"
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 3
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest // group_consume reads a new group from the start
	cfg.Consumer.Offsets.AutoCommit.Enable = false     // group_consume commits synchronously
	cfg.Producer.Flush.Messages = len(op.Records)
	cfg.Producer.Flush.Frequency = 50 * time.Millisecond
	switch op.Compression {
	case "gzip":
		cfg.Producer.Compression = sarama.CompressionGZIP
	case "snappy":
		cfg.Producer.Compression = sarama.CompressionSnappy
	case "lz4":
		cfg.Producer.Compression = sarama.CompressionLZ4
	case "zstd":
		cfg.Producer.Compression = sarama.CompressionZSTD
	}
	if op.Idempotent {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	if op.TransactionalID != "" {
		cfg.Producer.Idempotent = true
		cfg.Producer.Transaction.ID = op.TransactionalID
		cfg.Net.MaxOpenRequests = 1
		cfg.Producer.Flush.Messages = 1
	}
	switch op.Isolation {
	case "read_committed":
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	case "read_uncommitted":
		cfg.Consumer.IsolationLevel = sarama.ReadUncommitted
	}
	cfg.Consumer.Return.Errors = true
	if op.SASL != nil && op.SASL.Mechanism == "PLAIN" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		cfg.Net.SASL.User, cfg.Net.SASL.Password = op.SASL.Username, op.SASL.Password
	}
	return cfg
}

// saramaTransaction runs op.Txns with sarama's transactional producer.
func saramaTransaction(client sarama.Client, op Op) Result {
	fail := func(err error) Result { return Result{ErrorCode: saramaCode(err), Error: err.Error()} }
	p, err := sarama.NewSyncProducerFromClient(client)
	if err != nil {
		return fail(fmt.Errorf("new transactional producer: %w", err))
	}
	defer p.Close()
	var res Result
	for _, t := range op.Txns {
		if err := p.BeginTxn(); err != nil {
			return fail(fmt.Errorf("begin: %w", err))
		}
		for _, r := range t.Records {
			m := &sarama.ProducerMessage{Topic: op.Topic, Partition: r.Partition}
			if r.Key != nil {
				m.Key = sarama.StringEncoder(*r.Key)
			}
			if r.Value != nil {
				m.Value = sarama.StringEncoder(*r.Value)
			}
			if _, off, err := p.SendMessage(m); err != nil {
				_ = p.AbortTxn()
				return fail(fmt.Errorf("send: %w", err))
			} else {
				res.Offsets = append(res.Offsets, off)
			}
		}
		if t.Group != "" {
			offs := map[string][]*sarama.PartitionOffsetMetadata{
				t.OffsetTopic: {{Partition: t.OffsetPartition, Offset: t.Offset}},
			}
			if err := p.AddOffsetsToTxn(offs, t.Group); err != nil {
				_ = p.AbortTxn()
				return fail(fmt.Errorf("add offsets: %w", err))
			}
		}
		if t.Abort {
			err = p.AbortTxn()
		} else {
			err = p.CommitTxn()
		}
		if err != nil {
			return fail(fmt.Errorf("end transaction (abort=%v): %w", t.Abort, err))
		}
	}
	return res
}

func saramaDo(ctx context.Context, op Op) (res Result) {
	cfg := saramaConfig(op)
	addrs := []string{op.Bootstrap}
	fail := func(err error) Result { return Result{ErrorCode: saramaCode(err), Error: err.Error()} }
	client, err := sarama.NewClient(addrs, cfg)
	if err != nil {
		return fail(fmt.Errorf("new client: %w", err))
	}
	defer client.Close()
	switch op.Op {
	case opTransaction:
		return saramaTransaction(client, op)
	case opGroupConsume:
		return saramaGroupConsume(ctx, client, op)
	case opCreate, opList, opDescribe, opAlterIncr, opAlterLegacy, opDeleteRecords, opDeleteTopic:
		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			return fail(fmt.Errorf("new admin: %w", err))
		}
		// Closing the admin closes client too; double close is harmless.
		defer admin.Close()
		return saramaAdmin(client, admin, op)
	case opProduce:
		p, err := sarama.NewSyncProducerFromClient(client)
		if err != nil {
			return fail(fmt.Errorf("new producer: %w", err))
		}
		defer p.Close()
		msgs := make([]*sarama.ProducerMessage, len(op.Records))
		for i, r := range op.Records {
			m := &sarama.ProducerMessage{Topic: op.Topic, Partition: op.Partition}
			if r.Key != nil {
				m.Key = sarama.StringEncoder(*r.Key)
			}
			if r.Value != nil {
				m.Value = sarama.StringEncoder(*r.Value)
			}
			if r.Timestamp != 0 {
				m.Timestamp = time.UnixMilli(r.Timestamp)
			}
			for _, h := range r.Headers {
				m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
			}
			msgs[i] = m
		}
		if err := p.SendMessages(msgs); err != nil {
			return fail(err)
		}
		for _, m := range msgs {
			res.Offsets = append(res.Offsets, m.Offset)
		}
		return res
	case opFetch:
		c, err := sarama.NewConsumerFromClient(client)
		if err != nil {
			return fail(fmt.Errorf("new consumer: %w", err))
		}
		defer c.Close()
		pc, err := c.ConsumePartition(op.Topic, op.Partition, op.Offset)
		if err != nil {
			return fail(fmt.Errorf("consume partition: %w", err))
		}
		defer pc.Close()
		for len(res.Records) < op.Max {
			select {
			case m := <-pc.Messages():
				r := Rec{Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp.UnixMilli()}
				if m.Key != nil {
					r.Key = strp(string(m.Key))
				}
				if m.Value != nil {
					r.Value = strp(string(m.Value))
				}
				for _, h := range m.Headers {
					r.Headers = append(r.Headers, [2]string{string(h.Key), string(h.Value)})
				}
				res.Records = append(res.Records, r)
			case e := <-pc.Errors():
				return fail(e)
			case <-ctx.Done():
				return res
			}
		}
		return res
	case opOffsetForTime:
		o, err := client.GetOffset(op.Topic, op.Partition, op.Timestamp)
		if err != nil {
			return fail(err)
		}
		res.Offset = o
		return res
	case opWatermarks:
		lo, err := client.GetOffset(op.Topic, op.Partition, sarama.OffsetOldest)
		if err != nil {
			return fail(err)
		}
		hi, err := client.GetOffset(op.Topic, op.Partition, sarama.OffsetNewest)
		if err != nil {
			return fail(err)
		}
		res.Low, res.High = lo, hi
		return res
	}
	return Result{ErrorCode: -1, Error: "unsupported op " + op.Op}
}

func saramaAdmin(client sarama.Client, admin sarama.ClusterAdmin, op Op) (res Result) {
	fail := func(err error) Result { return Result{ErrorCode: saramaCode(err), Error: err.Error()} }
	var err error
	switch op.Op {
	case opCreate:
		entries := map[string]*string{}
		for k, v := range op.Configs {
			entries[k] = strp(v)
		}
		err = admin.CreateTopic(op.Topic, &sarama.TopicDetail{
			NumPartitions: op.Partitions, ReplicationFactor: op.replicationFactor(), ConfigEntries: entries,
		}, false)
	case opList:
		var topics map[string]sarama.TopicDetail
		topics, err = admin.ListTopics()
		for name := range topics {
			res.Topics = append(res.Topics, name)
		}
		sort.Strings(res.Topics)
	case opDescribe:
		var entries []sarama.ConfigEntry
		entries, err = admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: op.Topic})
		res.Configs = map[string]string{}
		for _, e := range entries {
			res.Configs[e.Name] = e.Value
		}
	case opAlterIncr:
		entries := map[string]sarama.IncrementalAlterConfigsEntry{}
		for k, v := range op.Configs {
			entries[k] = sarama.IncrementalAlterConfigsEntry{Operation: sarama.IncrementalAlterConfigsOperationSet, Value: strp(v)}
		}
		err = admin.IncrementalAlterConfig(sarama.TopicResource, op.Topic, entries, false)
	case opAlterLegacy:
		entries := map[string]*string{}
		for k, v := range op.Configs {
			entries[k] = strp(v)
		}
		err = admin.AlterConfig(sarama.TopicResource, op.Topic, entries, false)
	case opDeleteRecords:
		err = admin.DeleteRecords(op.Topic, map[int32]int64{op.Partition: op.Offset})
		if err == nil {
			res.Offset, err = client.GetOffset(op.Topic, op.Partition, sarama.OffsetOldest)
		}
	case opDeleteTopic:
		err = admin.DeleteTopic(op.Topic)
	}
	if err != nil {
		return fail(err)
	}
	return res
}

// saramaCode extracts the Kafka error code from a sarama error.
func saramaCode(err error) int16 {
	var pes sarama.ProducerErrors
	if errors.As(err, &pes) && len(pes) > 0 {
		err = pes[0].Err
	}
	var ke sarama.KError
	if errors.As(err, &ke) {
		return int16(ke)
	}
	var te *sarama.TopicError
	if errors.As(err, &te) {
		return int16(te.Err)
	}
	var dce *sarama.DescribeConfigError
	if errors.As(err, &dce) {
		return int16(dce.Err)
	}
	return -1
}

func set(ops ...string) map[string]bool {
	m := map[string]bool{}
	for _, o := range ops {
		m[o] = true
	}
	return m
}

// modVersion is the version of a Go module as go.mod pins it (test binaries
// carry no dependency build info).
func modVersion(path string) string {
	data, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == path {
			return f[1]
		}
	}
	return "unknown"
}
