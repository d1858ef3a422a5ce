package e2e

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// buildBatch encodes values as one uncompressed, non-idempotent record
// batch v2 (Kafka's layout, written out here so the test does not rely on
// Strata's own encoder).
func buildBatch(values [][]byte) []byte {
	now := time.Now().UnixMilli()
	var recs []byte
	for i, v := range values {
		var body []byte
		body = append(body, 0)                             // attributes
		body = binary.AppendVarint(body, 0)                // timestamp delta
		body = binary.AppendVarint(body, int64(i))         // offset delta
		body = binary.AppendVarint(body, -1)               // null key
		body = binary.AppendVarint(body, int64(len(v)))    // value length
		body = append(body, v...)                          // value
		body = binary.AppendVarint(body, 0)                // no headers
		recs = binary.AppendVarint(recs, int64(len(body))) // record length
		recs = append(recs, body...)
	}
	b := make([]byte, 61, 61+len(recs))
	be := binary.BigEndian
	be.PutUint64(b[0:], 0)                      // base offset
	be.PutUint32(b[12:], 0xffffffff)            // partition leader epoch -1
	b[16] = 2                                   // magic
	be.PutUint16(b[21:], 0)                     // attributes
	be.PutUint32(b[23:], uint32(len(values)-1)) // last offset delta
	be.PutUint64(b[27:], uint64(now))           // base timestamp
	be.PutUint64(b[35:], uint64(now))           // max timestamp
	be.PutUint64(b[43:], 0xffffffffffffffff)    // producer id -1
	be.PutUint16(b[51:], 0xffff)                // producer epoch -1
	be.PutUint32(b[53:], 0xffffffff)            // base sequence -1
	be.PutUint32(b[57:], uint32(len(values)))   // record count
	b = append(b, recs...)
	be.PutUint32(b[8:], uint32(len(b)-12)) // batch length
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// rawProduce sends one acks=all Produce request with a batch of values to
// topic/partition and returns the partition's error code and base offset.
func rawProduce(ctx context.Context, cl *kgo.Client, topic string, partition int32, values [][]byte) (int16, int64, error) {
	return rawProduceRecords(ctx, cl, topic, partition, buildBatch(values))
}

// rawProduceBytes sends records (any bytes) as the partition's records and
// returns the partition's error code.
func rawProduceBytes(ctx context.Context, cl *kgo.Client, topic string, partition int32, records []byte) (int16, error) {
	code, _, err := rawProduceRecords(ctx, cl, topic, partition, records)
	return code, err
}

func rawProduceRecords(ctx context.Context, cl *kgo.Client, topic string, partition int32, records []byte) (int16, int64, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return p.ErrorCode, p.BaseOffset, nil
		}
	}
	return 0, 0, errNoPartition
}

type constErr string

func (e constErr) Error() string { return string(e) }

const errNoPartition = constErr("produce response has no partition")
