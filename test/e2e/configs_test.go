package e2e

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicState is what must survive a restart: partition count, topic id and
// the overridden configs with their sources.
type topicState struct {
	partitions int
	id         string
	configs    map[string]string // name -> value of DYNAMIC_TOPIC_CONFIG entries
	bad        []string          // overrides described with another source
}

func describeTopics(t *testing.T, ctx context.Context, adm *kadm.Client, overrides map[string]map[string]string) map[string]topicState {
	t.Helper()
	names := make([]string, 0, len(overrides))
	for n := range overrides {
		names = append(names, n)
	}
	sort.Strings(names)
	md, err := adm.ListTopics(ctx, names...)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatalf("describe configs: %v", err)
	}
	out := map[string]topicState{}
	for _, n := range names {
		td, ok := md[n]
		if !ok || td.Err != nil {
			t.Fatalf("topic %s missing from metadata: %v", n, td.Err)
		}
		st := topicState{partitions: len(td.Partitions), id: td.ID.String(), configs: map[string]string{}}
		rc, err := rcs.On(n, nil)
		if err != nil || rc.Err != nil {
			t.Fatalf("describe configs of %s: %v %v", n, err, rc.Err)
		}
		for _, c := range rc.Configs {
			if _, over := overrides[n][c.Key]; !over {
				if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
					st.bad = append(st.bad, c.Key+" is DYNAMIC_TOPIC_CONFIG but was never set")
				}
				continue
			}
			if c.Source != kmsg.ConfigSourceDynamicTopicConfig {
				st.bad = append(st.bad, c.Key+" has source "+c.Source.String())
			}
			st.configs[c.Key] = c.MaybeValue()
		}
		out[n] = st
	}
	return out
}

func checkTopics(t *testing.T, when string, got map[string]topicState, overrides map[string]map[string]string, parts map[string]int, ids map[string]string) {
	t.Helper()
	for n, want := range overrides {
		st := got[n]
		if st.partitions != parts[n] {
			t.Errorf("%s: %s has %d partitions, want %d", when, n, st.partitions, parts[n])
		}
		if ids != nil && st.id != ids[n] {
			t.Errorf("%s: %s topic id %s, was %s", when, n, st.id, ids[n])
		}
		for k, v := range want {
			if st.configs[k] != v {
				t.Errorf("%s: %s %s=%q, want %q", when, n, k, st.configs[k], v)
			}
		}
		if len(st.bad) > 0 {
			t.Errorf("%s: %s: %s", when, n, strings.Join(st.bad, "; "))
		}
	}
}

// TestConfigsSurviveRestart creates topics with configs (and alters some),
// restarts the binary cleanly and after SIGKILL, and checks DescribeConfigs
// returns the same values as DYNAMIC_TOPIC_CONFIG, with partitions and
// topic ids unchanged.
func TestConfigsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	p := startBroker(t, dir)
	ctx := ctxFor(t, 2*time.Minute)
	overrides := map[string]map[string]string{
		"orders": {
			"retention.ms": "3600000", "segment.bytes": "1048576", "max.message.bytes": "2000000",
			"message.timestamp.type": "LogAppendTime",
		},
		"profiles": {
			"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2", "delete.retention.ms": "1000",
			"segment.ms": "600000", "compression.type": "zstd",
		},
		"audit": {"retention.bytes": "10485760", "cleanup.policy": "compact,delete"},
	}
	parts := map[string]int{"orders": 3, "profiles": 2, "audit": 1}
	adm := newAdmin(t, p.Kafka)
	for n, cfg := range overrides {
		m := map[string]*string{}
		for k, v := range cfg {
			m[k] = &v
		}
		res, err := adm.CreateTopic(ctx, int32(parts[n]), 1, m, n)
		if err != nil || res.Err != nil {
			t.Fatalf("create %s: %v %v", n, err, res.Err)
		}
	}
	// Alter after creation: one set, one delete (back to default).
	alter := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("7200000")},
		{Op: kadm.DeleteConfig, Name: "message.timestamp.type"},
	}
	ar, err := adm.AlterTopicConfigs(ctx, alter, "orders")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("alter orders: %v %+v", err, ar)
	}
	overrides["orders"]["retention.ms"] = "7200000"
	delete(overrides["orders"], "message.timestamp.type")
	if _, err := adm.CreatePartitions(ctx, 1, "audit"); err != nil {
		t.Fatalf("add a partition to audit: %v", err)
	}
	parts["audit"] = 2

	before := describeTopics(t, ctx, adm, overrides)
	checkTopics(t, "before restart", before, overrides, parts, nil)
	ids := map[string]string{}
	for n, st := range before {
		ids[n] = st.id
	}

	if code := p.Term(); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d", code)
	}
	p = startBroker(t, dir)
	adm = newAdmin(t, p.Kafka)
	checkTopics(t, "after clean restart", describeTopics(t, ctx, adm, overrides), overrides, parts, ids)

	p.Kill()
	p = startBroker(t, dir)
	adm = newAdmin(t, p.Kafka)
	checkTopics(t, "after SIGKILL and restart", describeTopics(t, ctx, adm, overrides), overrides, parts, ids)
}
