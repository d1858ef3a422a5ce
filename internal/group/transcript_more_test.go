package group

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/transcript"
)

// The transcript commands of the consumer group protocol (KIP-848) and of
// transactional offset commits (KIP-98, KIP-447); see TestTranscripts.

// defaultTopics are the topics a transcript starts with.
var defaultTopics = []TopicInfo{{Name: "t", ID: [16]byte{1}, Partitions: 4}, {Name: "u", ID: [16]byte{2}, Partitions: 2}}

// setTopics is "topics NAME:PARTITIONS...": the cluster's topics as the
// coordinator sees them (an existing name keeps its id; a new one gets the
// next id).
func (s *groupScript) setTopics(cmd transcript.Command) {
	ids := map[string][16]byte{}
	next := byte(0)
	for _, ti := range s.topics {
		ids[ti.Name] = ti.ID
		next = max(next, ti.ID[0])
	}
	var ts []TopicInfo
	for _, a := range cmd.Args {
		name, n, ok := strings.Cut(a, ":")
		parts, err := strconv.Atoi(n)
		if !ok || err != nil {
			cmd.Fatalf("want NAME:PARTITIONS, got %q", a)
		}
		id, ok := ids[name]
		if !ok {
			next++
			id = [16]byte{next}
		}
		ts = append(ts, TopicInfo{Name: name, ID: id, Partitions: int32(parts)})
	}
	s.topics = ts
}

// hb is "hb GROUP M epoch=N [topics=a,b] [regex=R] [owned=t:0,t:1]
// [instance=I] [assignor=A] [rebalance=30s]": a ConsumerGroupHeartbeat v1
// with member id M. Without owned the request carries no owned partitions
// (a keepalive); owned= (empty) says it owns none.
func (s *groupScript) hb(cmd transcript.Command) string {
	group, alias := cmd.Arg(0), cmd.Arg(1)
	s.bind(alias, alias)
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = group, alias, int32(cmd.Int("epoch", 0))
	r.RebalanceTimeoutMillis = int32(cmd.Duration("rebalance", 30*time.Second).Milliseconds())
	if in, ok := cmd.Opts["instance"]; ok {
		if s.instances == nil {
			s.instances = map[string]string{}
		}
		s.instances[alias] = in
	}
	r.InstanceID = s.instance(alias)
	if ts, ok := cmd.Opts["topics"]; ok {
		r.SubscribedTopicNames = []string{}
		if ts != "" {
			r.SubscribedTopicNames = strings.Split(ts, ",")
		}
	}
	if re, ok := cmd.Opts["regex"]; ok {
		r.SubscribedTopicRegex = &re
	}
	if a, ok := cmd.Opts["assignor"]; ok {
		r.ServerAssignor = &a
	}
	if owned, ok := cmd.Opts["owned"]; ok {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		byTopic := map[string][]int32{}
		var names []string
		for _, k := range splitList(owned) {
			tp := s.parseTP(cmd, k)
			if _, seen := byTopic[tp.topic]; !seen {
				names = append(names, tp.topic)
			}
			byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
		}
		for _, name := range names {
			t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			t.TopicID, t.Partitions = s.topicID(cmd, name), byTopic[name]
			r.Topics = append(r.Topics, t)
		}
	}
	resp := s.do(r).(*kmsg.ConsumerGroupHeartbeatResponse)
	if resp.ErrorCode != 0 {
		return fmt.Sprintf("%s: hb: %s", alias, transcript.ErrorName(resp.ErrorCode))
	}
	out := fmt.Sprintf("%s: hb: epoch=%d", alias, resp.MemberEpoch)
	if resp.Assignment != nil {
		var ps []tp
		for _, t := range resp.Assignment.Topics {
			for _, p := range t.Partitions {
				ps = append(ps, tp{s.topicName(t.TopicID), p})
			}
		}
		out += " assignment=" + tpList(ps)
	}
	return out
}

// txnCommit is "txncommit GROUP pid=N [epoch=E] [member=M gen=N]
// TOPIC:P=OFFSET...": TxnOffsetCommit v3 of producer N (transactional id
// "tx"), as the member M of generation (or member epoch) gen when given.
func (s *groupScript) txnCommit(cmd transcript.Command) []string {
	r := kmsg.NewPtrTxnOffsetCommitRequest()
	r.Version = 3
	r.TransactionalID, r.Group = "tx", cmd.Arg(0)
	r.ProducerID, r.ProducerEpoch = cmd.Int("pid", -1), int16(cmd.Int("epoch", 0))
	r.Generation = int32(cmd.Int("gen", -1))
	if m, ok := cmd.Opts["member"]; ok {
		r.MemberID, r.InstanceID = s.ids[m], s.instance(m)
		if r.MemberID == "" {
			r.MemberID = m // never joined: the name itself
		}
	}
	for _, k := range s.offsetOpts(cmd) {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic = k.topic
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = k.partition, k.offset, -1
		t.Partitions = append(t.Partitions, rp)
		r.Topics = append(r.Topics, t)
	}
	resp := s.do(r).(*kmsg.TxnOffsetCommitResponse)
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("txncommit %s:%d: %s", t.Topic, p.Partition, transcript.ErrorName(p.ErrorCode)))
		}
	}
	return out
}

// marker is "marker GROUP pid=N commit|abort [epoch=E]": producer N's
// transaction marker is written to GROUP's __consumer_offsets partition
// and reported to the coordinator, as the transaction coordinator does.
func (s *groupScript) marker(cmd transcript.Command) string {
	commit := cmd.Arg(1) == "commit"
	if !commit && cmd.Arg(1) != "abort" {
		cmd.Fatalf("marker wants commit or abort")
	}
	p := PartitionFor(cmd.Arg(0), s.cfg.NumPartitions)
	pid := cmd.Int("pid", -1)
	if err := s.store.marker(p, pid, int16(cmd.Int("epoch", 0)), commit); err != nil {
		cmd.Fatalf("marker: %v", err)
	}
	s.c.CompleteTxn(p, pid, commit)
	return ""
}

// offsetOpt is one TOPIC:P=OFFSET option.
type offsetOpt struct {
	tp
	offset int64
}

// offsetOpts returns cmd's TOPIC:P=OFFSET options sorted by partition.
func (s *groupScript) offsetOpts(cmd transcript.Command) []offsetOpt {
	var out []offsetOpt
	for k, v := range cmd.Opts {
		if !strings.Contains(k, ":") {
			continue
		}
		o, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			cmd.Fatalf("want TOPIC:P=OFFSET, got %s=%s", k, v)
		}
		out = append(out, offsetOpt{s.parseTP(cmd, k), o})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].topic != out[j].topic {
			return out[i].topic < out[j].topic
		}
		return out[i].partition < out[j].partition
	})
	return out
}

func (s *groupScript) parseTP(cmd transcript.Command, a string) tp {
	topic, part, ok := strings.Cut(a, ":")
	p, err := strconv.Atoi(part)
	if !ok || err != nil {
		cmd.Fatalf("want TOPIC:PARTITION, got %q", a)
	}
	return tp{topic, int32(p)}
}

func (s *groupScript) topicID(cmd transcript.Command, name string) [16]byte {
	for _, ti := range s.topics {
		if ti.Name == name {
			return ti.ID
		}
	}
	cmd.Fatalf("no topic %s (see topics)", name)
	return [16]byte{}
}

func (s *groupScript) topicName(id [16]byte) string {
	for _, ti := range s.topics {
		if ti.ID == id {
			return ti.Name
		}
	}
	return fmt.Sprintf("%x", id)
}

// describeConsumer prints a KIP-848 group: its state, group epoch,
// assignment epoch and assignor, and per member its epoch, the partitions
// it owns as far as the coordinator knows and, when they differ, its
// target assignment.
func (s *groupScript) describeConsumer(g *group) string {
	cg := g.consumer
	var ms []string
	for id, m := range cg.members {
		d := fmt.Sprintf("%s@%d", s.alias(id), m.epoch)
		if m.instanceID != nil {
			d += "(" + *m.instanceID + ")"
		}
		d += tpList(m.assigned.sorted())
		if t := cg.target[id]; t.key() != m.assigned.key() {
			d += "->" + tpList(t.sorted())
		}
		ms = append(ms, d)
	}
	sort.Strings(ms)
	return fmt.Sprintf("%s: consumer state=%s epoch=%d assignment-epoch=%d assignor=%s members=[%s]",
		g.id, cg.stateName(), cg.epoch, cg.assignmentEpoch, cg.assignorName(), strings.Join(ms, " "))
}

// tpList prints partitions as [t:0 t:1].
func tpList(ps []tp) string {
	sortTPs(ps)
	out := make([]string, len(ps))
	for i, k := range ps {
		out[i] = fmt.Sprintf("%s:%d", k.topic, k.partition)
	}
	return "[" + strings.Join(out, " ") + "]"
}

func splitList(s string) []string {
	if s == "" || s == "-" {
		return nil
	}
	return strings.Split(s, ",")
}
