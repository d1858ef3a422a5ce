package controller

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-io/strata/internal/meta"
	"github.com/strata-io/strata/internal/transcript"
)

// TestTranscripts runs every testdata/*.txt: blocks of
//
//	command args...
//	----
//	expected output
//
// separated by blank lines (as etcd raft's interaction tests). Commands:
//
//	broker add ID [rack=R] [unclean]   register a broker
//	broker remove ID...                fence brokers (lease expired / shut down)
//	create NAME partitions=N rf=R [min-isr=M] [unclean]
//	assign NAME P:B,B... P:B,B... [min-isr=M]   create with replica_assignment
//	reconcile                          react to broker changes; apply and print
//	show [NAME]                        print partitions
//	load                               replicas and leaders per broker
//
// Run with -rewrite to regenerate the expected output (internal/transcript).
func TestTranscripts(t *testing.T) {
	transcript.Run(t, "testdata/*.txt", func(t *testing.T) func(transcript.Command) string {
		h := &harness{s: &State{Brokers: map[int32]BrokerInfo{}, Topics: map[string]*TopicInfo{}}}
		return func(c transcript.Command) string { return h.run(c.Line) }
	})
}

type harness struct {
	s   *State
	rev int64
}

func (h *harness) apply(ds []Decision) string {
	var lines []string
	for _, d := range ds {
		t := h.s.Topics[d.Topic]
		for int(d.TP.Partition) >= len(t.Parts) {
			t.Parts = append(t.Parts, meta.Partition{})
		}
		if t.Parts[d.TP.Partition].ModRevision != d.Expect {
			lines = append(lines, fmt.Sprintf("CONFLICT %s/%d", d.Topic, d.TP.Partition))
			continue
		}
		h.rev++
		t.Parts[d.TP.Partition] = meta.Partition{TopicPartition: d.TP, State: d.New, ModRevision: h.rev}
		lines = append(lines, fmt.Sprintf("%s/%d %s (%s)", d.Topic, d.TP.Partition, d.New, d.Reason))
	}
	if len(lines) == 0 {
		return "no change"
	}
	return strings.Join(lines, "\n")
}

func (h *harness) run(cmd string) string {
	f := strings.Fields(cmd)
	kv := map[string]string{}
	var pos []string
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	policy := func() Policy {
		p := Policy{MinISR: 1}
		if v, ok := kv["min-isr"]; ok {
			p.MinISR = atoi(v)
		}
		for _, a := range pos {
			if a == "unclean" {
				p.Unclean = true
			}
		}
		return p
	}
	errText := func(err error) string {
		var pe *PlacementError
		if errors.As(err, &pe) {
			return fmt.Sprintf("error %d: %s", pe.Code, pe.Message)
		}
		return "error: " + err.Error()
	}
	switch f[0] {
	case "broker":
		switch pos[0] {
		case "add":
			id := int32(atoi(pos[1]))
			h.s.Brokers[id] = BrokerInfo{ID: id, Rack: kv["rack"], UncleanShutdown: len(pos) > 2 && pos[2] == "unclean"}
		case "remove":
			for _, a := range pos[1:] {
				delete(h.s.Brokers, int32(atoi(a)))
			}
		}
		return fmt.Sprintf("live %v", h.s.BrokerIDs())
	case "create":
		name := pos[0]
		reps, err := h.s.Place(atoi(kv["partitions"]), atoi(kv["rf"]))
		if err != nil {
			return errText(err)
		}
		h.s.Topics[name] = &TopicInfo{Name: name, ID: name + "-id", Policy: policy()}
		return h.apply(NewPartitions(name, name+"-id", 0, reps))
	case "assign":
		name := pos[0]
		asg := map[int32][]int32{}
		for _, a := range pos[1:] {
			p, bs, _ := strings.Cut(a, ":")
			var ids []int32
			for _, b := range strings.Split(bs, ",") {
				ids = append(ids, int32(atoi(b)))
			}
			asg[int32(atoi(p))] = ids
		}
		reps, err := h.s.ValidateAssignment(0, asg)
		if err != nil {
			return errText(err)
		}
		h.s.Topics[name] = &TopicInfo{Name: name, ID: name + "-id", Policy: policy()}
		return h.apply(NewPartitions(name, name+"-id", 0, reps))
	case "reconcile":
		return h.apply(h.s.Reconcile())
	case "show":
		var lines []string
		for _, name := range h.s.TopicNames() {
			if len(pos) > 0 && pos[0] != name {
				continue
			}
			for i, p := range h.s.Topics[name].Parts {
				lines = append(lines, fmt.Sprintf("%s/%d %s", name, i, p.State))
			}
		}
		return strings.Join(lines, "\n")
	case "load":
		l := h.s.load()
		var lines []string
		for _, id := range h.s.BrokerIDs() {
			lines = append(lines, fmt.Sprintf("broker %d rack=%s replicas=%d leaders=%d", id, h.s.Brokers[id].Rack, l.replicas[id], l.leaders[id]))
		}
		return strings.Join(lines, "\n")
	}
	return "unknown command " + f[0]
}
