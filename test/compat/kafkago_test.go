package compat

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// kafkaGoClient drives segmentio/kafka-go in-process (Writer, Reader, Conn
// and Client admin). kafka-go has no DeleteRecords and no idempotent producer,
// and its Reader ignores a batch's LogAppendTime (it reports the producer's
// record timestamps), so the LogAppendTime scenario is skipped for it.
func kafkaGoClient() *Client {
	return &Client{
		Name: "kafka-go",
		Supports: set(opCreate, opList, opDescribe, opAlterIncr, opAlterLegacy,
			opDeleteTopic, opProduce, opFetch, opOffsetForTime, opWatermarks, opTimestamps, opHeaders, opNullRecord, opGroupConsume),
		Codecs:   []string{"none", "gzip", "snappy", "lz4", "zstd"},
		Versions: map[string]string{"kafka-go": modVersion("github.com/segmentio/kafka-go")},
		do:       kafkaGoDo,
	}
}

// fixedBalancer sends every message to one partition.
type fixedBalancer int

func (b fixedBalancer) Balance(_ kafka.Message, _ ...int) int { return int(b) }

func kafkaGoDo(ctx context.Context, op Op) (res Result) {
	fail := func(err error) Result { return Result{ErrorCode: kafkaGoCode(err), Error: err.Error()} }
	// A fresh transport per op: the default one caches metadata across ops.
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	cl := &kafka.Client{Addr: kafka.TCP(op.Bootstrap), Timeout: 30 * time.Second, Transport: tr}
	topicRes := func(errs map[string]error) Result {
		if err := errs[op.Topic]; err != nil {
			return fail(err)
		}
		return res
	}
	switch op.Op {
	case opGroupConsume:
		return kafkaGoGroupConsume(ctx, op)
	case opCreate:
		tc := kafka.TopicConfig{Topic: op.Topic, NumPartitions: int(op.Partitions), ReplicationFactor: int(op.replicationFactor())}
		for k, v := range op.Configs {
			tc.ConfigEntries = append(tc.ConfigEntries, kafka.ConfigEntry{ConfigName: k, ConfigValue: v})
		}
		r, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{tc}})
		if err != nil {
			return fail(err)
		}
		return topicRes(r.Errors)
	case opList:
		r, err := cl.Metadata(ctx, &kafka.MetadataRequest{})
		if err != nil {
			return fail(err)
		}
		for _, t := range r.Topics {
			if t.Error != nil {
				continue
			}
			res.Topics = append(res.Topics, t.Name)
		}
		sort.Strings(res.Topics)
		return res
	case opDescribe:
		r, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{
			{ResourceType: kafka.ResourceTypeTopic, ResourceName: op.Topic}}})
		if err != nil {
			return fail(err)
		}
		if len(r.Resources) != 1 {
			return Result{ErrorCode: -1, Error: fmt.Sprintf("%d resources described", len(r.Resources))}
		}
		if err := r.Resources[0].Error; err != nil {
			return fail(err)
		}
		res.Configs = map[string]string{}
		for _, e := range r.Resources[0].ConfigEntries {
			res.Configs[e.ConfigName] = e.ConfigValue
		}
		return res
	case opAlterIncr:
		rr := kafka.IncrementalAlterConfigsRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: op.Topic}
		for k, v := range op.Configs {
			rr.Configs = append(rr.Configs, kafka.IncrementalAlterConfigsRequestConfig{Name: k, Value: v, ConfigOperation: kafka.ConfigOperationSet})
		}
		r, err := cl.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{rr}})
		if err != nil {
			return fail(err)
		}
		for _, x := range r.Resources {
			if x.Error != nil {
				return fail(x.Error)
			}
		}
		return res
	case opAlterLegacy:
		rr := kafka.AlterConfigRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: op.Topic}
		for k, v := range op.Configs {
			rr.Configs = append(rr.Configs, kafka.AlterConfigRequestConfig{Name: k, Value: v})
		}
		r, err := cl.AlterConfigs(ctx, &kafka.AlterConfigsRequest{Resources: []kafka.AlterConfigRequestResource{rr}})
		if err != nil {
			return fail(err)
		}
		for _, e := range r.Errors {
			if e != nil {
				return fail(e)
			}
		}
		return res
	case opDeleteTopic:
		r, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{op.Topic}})
		if err != nil {
			return fail(err)
		}
		return topicRes(r.Errors)
	case opProduce:
		w := &kafka.Writer{
			Addr: kafka.TCP(op.Bootstrap), Topic: op.Topic, Balancer: fixedBalancer(op.Partition),
			BatchSize: len(op.Records), BatchTimeout: 10 * time.Millisecond, RequiredAcks: kafka.RequireAll,
			MaxAttempts: 3, Transport: tr,
		}
		defer w.Close()
		switch op.Compression {
		case "gzip":
			w.Compression = kafka.Gzip
		case "snappy":
			w.Compression = kafka.Snappy
		case "lz4":
			w.Compression = kafka.Lz4
		case "zstd":
			w.Compression = kafka.Zstd
		}
		msgs := make([]kafka.Message, len(op.Records))
		for i, r := range op.Records {
			if r.Key != nil {
				msgs[i].Key = []byte(*r.Key)
			}
			if r.Value != nil {
				msgs[i].Value = []byte(*r.Value)
			}
			if r.Timestamp != 0 {
				msgs[i].Time = time.UnixMilli(r.Timestamp)
			}
			for _, h := range r.Headers {
				msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: h[0], Value: []byte(h[1])})
			}
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return fail(err)
		}
		return res
	case opFetch:
		iso := kafka.ReadUncommitted
		if op.Isolation == "read_committed" {
			iso = kafka.ReadCommitted
		}
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: []string{op.Bootstrap}, Topic: op.Topic, Partition: int(op.Partition),
			MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 200 * time.Millisecond, IsolationLevel: iso,
		})
		defer r.Close()
		if err := r.SetOffset(op.Offset); err != nil {
			return fail(err)
		}
		for len(res.Records) < op.Max {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return res
				}
				return fail(err)
			}
			rec := Rec{Partition: int32(m.Partition), Offset: m.Offset, Timestamp: m.Time.UnixMilli()}
			if m.Key != nil {
				rec.Key = strp(string(m.Key))
			}
			if m.Value != nil {
				rec.Value = strp(string(m.Value))
			}
			for _, h := range m.Headers {
				rec.Headers = append(rec.Headers, [2]string{h.Key, string(h.Value)})
			}
			res.Records = append(res.Records, rec)
		}
		return res
	case opOffsetForTime, opWatermarks:
		conn, err := kafka.DialLeader(ctx, "tcp", op.Bootstrap, op.Topic, int(op.Partition))
		if err != nil {
			return fail(err)
		}
		defer conn.Close()
		if op.Op == opOffsetForTime {
			if res.Offset, err = conn.ReadOffset(time.UnixMilli(op.Timestamp)); err != nil {
				return fail(err)
			}
			return res
		}
		if res.Low, res.High, err = conn.ReadOffsets(); err != nil {
			return fail(err)
		}
		return res
	}
	return Result{ErrorCode: -1, Error: "unsupported op " + op.Op}
}

// kafkaGoCode extracts the Kafka error code from a kafka-go error.
func kafkaGoCode(err error) int16 {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil {
				err = e
				break
			}
		}
	}
	var ke kafka.Error
	if errors.As(err, &ke) {
		return int16(ke)
	}
	return -1
}

func TestKafkaGo(t *testing.T) { t.Parallel(); runSuite(t, kafkaGoClient()) }
