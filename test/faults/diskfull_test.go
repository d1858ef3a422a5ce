package faults

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/faults"
)

// The full-disk rows. A log dir fills with the broker's own data until
// less than strata.log.min.free.bytes is left (the free-space reserve):
// the broker refuses appends to it with KAFKA_STORAGE_ERROR (leader and
// follower appends alike) and keeps serving everything else; on a
// combined node the metadata store's member, whose WAL shares that disk,
// writes into the space the reserve keeps and stays up. The ballast
// leaves diskFullLeft bytes: below the reserve the clusters run with
// (diskReserve), well above what the store writes during a fault (etcd
// preallocates its next 64 MiB WAL file ahead).
const (
	loopDiskSize = 1 << 30 // a combined node's loop-mounted ext4 (sparse)
	diskReserve  = 256 << 20
	diskFullLeft = 160 << 20
	// tmpfsReserve is the reserve of the split layout's broker-only nodes
	// (256 MiB tmpfs, no metadata store on it).
	tmpfsReserve = 16 << 20
)

// reserveArgs give the combined nodes on loop disks their reserve.
var reserveArgs = []string{"--strata.log.min.free.bytes", fmt.Sprint(diskReserve)}

// diskFullRows run on the combined layout with loop-mounted directories.
var diskFullRows = []clusterFault{
	{"disk-full-combined", func(c *netCluster, topic string, logf func(string, ...any)) faults.Fault {
		var victim int
		var probe string
		return faults.FuncFault{Label: "fill the disk of the leader of " + topic + "-0 (broker and metadata-store member) below its free-space reserve, then free it",
			InjectFn: func(ctx context.Context) error {
				victim = c.leader(ctx, topic, logf)
				logf("fill the disk of %s to %d MiB free (reserve %d MiB)", c.procs[victim].Name(), diskFullLeft>>20, diskReserve>>20)
				var err error
				probe, err = c.diskFull(ctx, victim, func() error { return c.disks[victim].FillTo(diskFullLeft) }, logf)
				return err
			}, HealFn: func(ctx context.Context) error {
				if err := c.disks[victim].Free(); err != nil {
					return err
				}
				c.dropProbe(ctx, probe, logf)
				return nil
			}}
	}},
}

var probes atomic.Int64

// diskFull creates a probe topic (outside the checked workload) whose
// partition 0 is led by node victim and partition 1 by another node,
// fills victim's disk (fill) and checks what a full log dir must do:
// produce to partition 1 is acknowledged (acks=all: the full follower
// leaves the ISR), produce to partition 0 is answered KAFKA_STORAGE_ERROR
// by victim, which keeps running and still writes metadata (an
// IncrementalAlterConfigs through it), and logged no ENOSPC. A failed
// check is reported with c.errorf; an error means the fault could not be
// set up.
func (c *netCluster) diskFull(ctx context.Context, victim int, fill func() error, logf func(string, ...any)) (string, error) {
	o := c.others(victim)
	probe := fmt.Sprintf("diskfull-probe-%d", probes.Add(1))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...))
	if err != nil {
		return probe, err
	}
	defer cl.Close()
	// A manual assignment: the first replica leads a new partition.
	creq := kmsg.NewPtrCreateTopicsRequest()
	creq.TimeoutMillis = 30000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = probe, -1, -1
	for p, reps := range [][]int{{victim, o[0], o[1]}, {o[0], victim, o[1]}} {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition = int32(p)
		for _, r := range reps {
			a.Replicas = append(a.Replicas, c.ids[r])
		}
		ct.ReplicaAssignment = append(ct.ReplicaAssignment, a)
	}
	creq.Topics = append(creq.Topics, ct)
	if err := retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := creq.RequestWith(ctx, cl)
		if err != nil {
			return false, err
		}
		code := resp.Topics[0].ErrorCode
		return code == 0 || code == kerr.TopicAlreadyExists.Code, kerr.ErrorForCode(code)
	}); err != nil {
		return probe, fmt.Errorf("create %s: %w", probe, err)
	}
	leaders := []int32{c.ids[victim], c.ids[o[0]]}
	for p, l := range leaders { // both partitions take writes before the fill
		if err := retry(ctx, func(ctx context.Context) (bool, error) {
			code, err := probeProduce(ctx, cl, l, probe, int32(p))
			return err == nil && code == 0, errOrCode(err, code)
		}); err != nil {
			return probe, fmt.Errorf("produce to %s-%d on node %d before the fill: %w", probe, p, l, err)
		}
	}
	if err := fill(); err != nil {
		return probe, err
	}
	var seen []string
	if err := retry(ctx, func(ctx context.Context) (bool, error) {
		code, err := probeProduce(ctx, cl, leaders[0], probe, 0)
		if e := errOrCode(err, code); e != nil && (len(seen) == 0 || seen[len(seen)-1] != e.Error()) {
			seen = append(seen, e.Error())
		}
		return err == nil && code == kerr.KafkaStorageError.Code, errOrCode(err, code)
	}); err != nil {
		c.errorf("disk full on %s: produce to its own leader %s-0 never answered KAFKA_STORAGE_ERROR (answers: %v)", c.procs[victim].Name(), probe, seen)
	}
	if err := retry(ctx, func(ctx context.Context) (bool, error) {
		code, err := probeProduce(ctx, cl, leaders[1], probe, 1)
		return err == nil && code == 0, errOrCode(err, code)
	}); err != nil {
		c.errorf("disk full on %s: produce to %s-1 on node %d (another leader) not acknowledged: %v", c.procs[victim].Name(), probe, leaders[1], err)
	}
	if err := retry(ctx, func(ctx context.Context) (bool, error) {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, probe
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Op, cfg.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("604800001")
		res.Configs = append(res.Configs, cfg)
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(ctx, cl.Broker(int(leaders[0])))
		if err != nil {
			return false, err
		}
		return resp.Resources[0].ErrorCode == 0, kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}); err != nil {
		c.errorf("disk full on %s: a metadata write through it failed: %v", c.procs[victim].Name(), err)
	}
	if !c.procs[victim].Running() {
		c.errorf("disk full on %s: the node exited", c.procs[victim].Name())
	}
	for _, l := range strings.Split(c.procs[victim].Output(), "\n") {
		if strings.Contains(l, "no space left on device") && strings.Contains(l, "etcd") {
			c.errorf("disk full on %s: the metadata store hit ENOSPC: %s", c.procs[victim].Name(), l)
			break
		}
	}
	logf("disk full on %s: own leader answered %v; other leader acknowledged; metadata written through it", c.procs[victim].Name(), seen)
	return probe, nil
}

// dropProbe deletes a probe topic (best effort: the deletion completes in
// the background if it takes longer).
func (c *netCluster) dropProbe(ctx context.Context, probe string, logf func(string, ...any)) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs...))
	if err != nil {
		return
	}
	defer cl.Close()
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).DeleteTopics(dctx, probe); err != nil {
		logf("delete %s: %v", probe, err)
	}
}

// retry calls f every 250 ms until it reports done, for up to 60 s
// (only a real failure takes that long), and returns f's last error.
func retry(ctx context.Context, f func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
		done, err := f(rctx)
		rcancel()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func errOrCode(err error, code int16) error {
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(code)
}

// probeProduce sends one acks=all record to topic/partition on node id and
// returns the partition's error code.
func probeProduce(ctx context.Context, cl *kgo.Client, id int32, topic string, partition int32) (int16, error) {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, probeBatch([]byte("probe"))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("produce answer of %d topics", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0].ErrorCode, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// probeBatch is one uncompressed, non-idempotent record batch v2 holding
// value (Kafka's layout, written out so the check does not rely on
// Strata's encoder).
func probeBatch(value []byte) []byte {
	now := time.Now().UnixMilli()
	var body []byte
	body = append(body, 0)                              // attributes
	body = binary.AppendVarint(body, 0)                 // timestamp delta
	body = binary.AppendVarint(body, 0)                 // offset delta
	body = binary.AppendVarint(body, -1)                // null key
	body = binary.AppendVarint(body, int64(len(value))) // value length
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	recs := binary.AppendVarint(nil, int64(len(body)))
	recs = append(recs, body...)
	b := make([]byte, 61, 61+len(recs))
	be := binary.BigEndian
	be.PutUint32(b[12:], 0xffffffff)         // partition leader epoch -1
	b[16] = 2                                // magic
	be.PutUint64(b[27:], uint64(now))        // base timestamp
	be.PutUint64(b[35:], uint64(now))        // max timestamp
	be.PutUint64(b[43:], 0xffffffffffffffff) // producer id -1
	be.PutUint16(b[51:], 0xffff)             // producer epoch -1
	be.PutUint32(b[53:], 0xffffffff)         // base sequence -1
	be.PutUint32(b[57:], 1)                  // record count
	b = append(b, recs...)
	be.PutUint32(b[8:], uint32(len(b)-12)) // batch length
	be.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}
