package config

import (
	"errors"
	"strings"
	"testing"
)

// TestDynamicRules: Kafka's DynamicBrokerConfig.validateConfigs order and
// messages, then Strata's refusal of what it cannot apply while running.
func TestDynamicRules(t *testing.T) {
	for _, tc := range []struct {
		configs   map[string]string
		perBroker bool
		want      string // "" = accepted
	}{
		{map[string]string{"log.retention.ms": "1000", "message.max.bytes": "5000"}, false, ""},
		{map[string]string{"log.retention.hours": "1"}, true, ""},
		{map[string]string{"log.dirs": "/x", "listeners": "PLAINTEXT://:1"}, false, "Cannot update these configs dynamically: log.dirs"},
		{map[string]string{"listeners": "PLAINTEXT://:1"}, false, "Cannot update these configs at default cluster level, broker id must be specified: listeners"},
		{map[string]string{"listeners": "PLAINTEXT://:1"}, true, "Strata cannot apply these configs while running: listeners"},
		{map[string]string{"max.connections": "5"}, false, ""},
		{map[string]string{"log.cleaner.threads": "2"}, false, "Strata cannot apply these configs while running: log.cleaner.threads"},
		{map[string]string{"what.ever": "5"}, true, "unknown broker configs: what.ever"},
		{map[string]string{"log.cleanup.policy": "nope"}, true, "log.cleanup.policy"},
	} {
		err := ValidateDynamic(tc.configs, tc.perBroker)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.configs, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v perBroker=%v: %v, want %q", tc.configs, tc.perBroker, err, tc.want)
		}
	}
	if Mode("log.retention.ms") != ClusterWide || Mode("log.dirs") != ReadOnly || Mode("listeners") != ReadOnly {
		t.Error("update modes")
	}
}

// TestWithDynamicPrecedence: per-broker over cluster default over static
// over default, and a dynamic synonym hides the static value of another
// (Kafka's DynamicBrokerConfig.overrideProps).
func TestWithDynamicPrecedence(t *testing.T) {
	b := DefaultBroker()
	if err := b.Set("log.retention.ms", "1000"); err != nil {
		t.Fatal(err)
	}
	if err := b.Set("message.max.bytes", "7000"); err != nil {
		t.Fatal(err)
	}
	d, ignored, err := b.WithDynamic(map[string]string{"message.max.bytes": "6000", "log.retention.hours": "2", "log.dirs": "/x"},
		map[string]string{"message.max.bytes": "5000"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ignored) != 1 || ignored[0] != "log.dirs" {
		t.Errorf("ignored %v", ignored)
	}
	if d.Get("message.max.bytes") != "5000" || d.SourceOf("message.max.bytes") != SourceDynamicBroker {
		t.Errorf("message.max.bytes %s from %d", d.Get("message.max.bytes"), d.SourceOf("message.max.bytes"))
	}
	ls := d.Layers("message.max.bytes")
	if len(ls) != 4 || ls[1] != (Layer{"6000", SourceDynamicDefault}) || ls[2] != (Layer{"7000", SourceStatic}) || ls[3].Source != SourceDefault {
		t.Errorf("layers %v", ls)
	}
	if v, src, _ := d.TopicDefault("retention.ms"); v != "7200000" || src != "log.retention.hours" {
		t.Errorf("retention.ms %s from %s", v, src)
	}
	if v, _, _ := b.TopicDefault("retention.ms"); v != "1000" {
		t.Errorf("the static configuration changed: retention.ms %s", v)
	}
	// Laying again starts from the static settings.
	d2, _, _ := d.WithDynamic(nil, nil)
	if d2.Get("message.max.bytes") != "7000" || d2.SourceOf("message.max.bytes") != SourceStatic {
		t.Errorf("relaid: %s", d2.Get("message.max.bytes"))
	}
}
