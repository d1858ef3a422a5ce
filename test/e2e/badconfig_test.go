package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestUnhonourableConfigsRejected: topic configs Strata cannot honour, unknown
// names and invalid values are refused with INVALID_CONFIG (40) at creation
// and alteration, and nothing is created or changed, also after a restart.
func TestUnhonourableConfigsRejected(t *testing.T) {
	dir := t.TempDir()
	p := startBroker(t, dir)
	ctx := ctxFor(t, time.Minute)
	adm := newAdmin(t, p.Kafka)
	str := func(s string) *string { return &s }
	for name, cfg := range map[string]map[string]*string{
		"remote-storage": {"remote.storage.enable": str("true")},
		"unknown-name":   {"no.such.config": str("1")},
		"bad-value":      {"retention.ms": str("soon")},
		"bad-policy":     {"cleanup.policy": str("shred")},
		"lag-order":      {"min.compaction.lag.ms": str("10"), "max.compaction.lag.ms": str("5")},
	} {
		res, err := adm.CreateTopic(ctx, 1, 1, cfg, name)
		if err == nil {
			err = res.Err // kadm returns a single topic's error as err too
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("create %s with %v: got %v, want INVALID_CONFIG", name, keys(cfg), err)
		}
	}
	if res, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": str("60000")}, "ok"); err != nil || res.Err != nil {
		t.Fatalf("create ok: %v %v", err, res.Err)
	}
	for _, ac := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: str("true")},
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: str("1")},
		{Op: kadm.SetConfig, Name: "no.such.config", Value: str("1")},
	} {
		rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{ac}, "ok")
		if err == nil && len(rs) == 1 {
			err = rs[0].Err
		}
		if !errors.Is(err, kerr.InvalidConfig) {
			t.Errorf("alter %s=%s: got %v (%+v), want INVALID_CONFIG", ac.Name, *ac.Value, err, rs)
		}
	}
	check := func(when string) {
		t.Helper()
		adm := newAdmin(t, p.Kafka)
		md, err := adm.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"remote-storage", "unknown-name", "bad-value", "bad-policy", "lag-order"} {
			if md.Has(n) {
				t.Errorf("%s: refused topic %s exists", when, n)
			}
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, "ok")
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := rcs.On("ok", nil)
		for _, c := range rc.Configs {
			if c.Source == 1 && c.Key != "retention.ms" {
				t.Errorf("%s: refused alteration left %s=%s as a topic override", when, c.Key, c.MaybeValue())
			}
		}
	}
	check("live")
	p.Kill()
	p = startBroker(t, dir)
	check("after SIGKILL and restart")
}

func keys(m map[string]*string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
