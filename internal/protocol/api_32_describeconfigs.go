package protocol

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/meta"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config resource types.
const (
	resourceTopic  = kmsg.ConfigResourceType(2)
	resourceBroker = kmsg.ConfigResourceType(4)
)

// handleDescribeConfigs (key 32, v1-4) lists every config of a topic (or
// of this broker) with value, source, read-only flag, and synonyms and
// documentation when asked.
func (s *Server) handleDescribeConfigs(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		entries, err := s.describeResource(rr)
		if err != nil {
			sr.ErrorCode = errCode(err)
			sr.ErrorMessage = errMessage(err)
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		want := map[string]bool{}
		for _, n := range rr.ConfigNames {
			want[n] = true
		}
		for _, e := range entries {
			if rr.ConfigNames != nil && !want[e.Name] {
				continue
			}
			sr.Configs = append(sr.Configs, describedConfig(e, req.IncludeSynonyms, req.IncludeDocumentation))
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return reply{msg: resp}, nil
}

func (s *Server) describeResource(rr kmsg.DescribeConfigsRequestResource) ([]broker.ConfigEntry, error) {
	switch rr.ResourceType {
	case resourceTopic:
		if s.cfg.Cluster != nil {
			t := s.cfg.Cluster.View().Topics[rr.ResourceName]
			if t == nil || t.Deleting {
				return nil, fmt.Errorf("topic %q: %w", rr.ResourceName, kerr.UnknownTopicOrPartition)
			}
			return s.b.DescribeConfigsFor(t.Configs), nil
		}
		return s.b.DescribeConfigs(rr.ResourceName)
	case resourceBroker:
		// Kafka's ConfigHelper.describeConfigs: "" is the cluster default
		// (its dynamic configs only), this node's id every setting with
		// its source; another id is not this broker's to describe.
		if rr.ResourceName == "" {
			return s.defaultBrokerEntries(), nil
		}
		if rr.ResourceName != strconv.Itoa(int(s.b.NodeID())) {
			return nil, fmt.Errorf("Unexpected broker id, expected %d or empty string, but received %s: %w", s.b.NodeID(), rr.ResourceName, kerr.InvalidRequest)
		}
		return s.brokerEntries(), nil
	default:
		return nil, fmt.Errorf("resource type %d is not supported: %w", rr.ResourceType, kerr.InvalidRequest)
	}
}

// brokerEntries lists this broker's settings with their current values
// and sources (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
// STATIC_BROKER_CONFIG, DEFAULT_CONFIG, most specific first, as synonyms);
// read-only unless Strata updates the setting dynamically.
func (s *Server) brokerEntries() []broker.ConfigEntry {
	cfg := s.b.Config()
	var out []broker.ConfigEntry
	for _, st := range config.BrokerSettings() {
		e := broker.ConfigEntry{Name: st.Name, Value: cfg.Get(st.Name), ReadOnly: st.ReadOnly, Type: st.Type, Doc: st.Doc,
			Source: broker.ConfigSource(cfg.SourceOf(st.Name))}
		for _, l := range cfg.Layers(st.Name) {
			e.Synonyms = append(e.Synonyms, broker.ConfigSynonym{Name: st.Name, Value: l.Value, Source: broker.ConfigSource(l.Source)})
		}
		e.Null = e.Value == ""
		if st.Type == config.TypePassword { // private keys: never on the wire (Kafka: null, is_sensitive)
			e.Value, e.Null, e.Sensitive, e.Synonyms = "", true, true, nil
		}
		out = append(out, e)
	}
	return out
}

// defaultBrokerEntries lists the cluster-wide dynamic broker configs
// (Kafka describes only those for the resource name "").
func (s *Server) defaultBrokerEntries() []broker.ConfigEntry {
	if s.cfg.Cluster == nil {
		return nil
	}
	def := s.cfg.Cluster.View().BrokerConfigs[meta.DefaultBrokerScope]
	out := []broker.ConfigEntry{}
	for _, name := range slices.Sorted(maps.Keys(def)) {
		st, ok := config.LookupBroker(name)
		if !ok {
			continue
		}
		v := def[name]
		e := broker.ConfigEntry{Name: name, Value: v, ReadOnly: st.ReadOnly, Type: st.Type, Doc: st.Doc, Source: broker.SourceDynamicDefault,
			Synonyms: []broker.ConfigSynonym{{Name: name, Value: v, Source: broker.SourceDynamicDefault}}}
		if st.Type == config.TypePassword {
			e.Value, e.Null, e.Sensitive, e.Synonyms = "", true, true, nil
		}
		out = append(out, e)
	}
	return out
}

// describedConfig converts one entry to the wire form.
func describedConfig(e broker.ConfigEntry, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = e.Name
	if !e.Null {
		v := e.Value
		c.Value = &v
	}
	c.ReadOnly = e.ReadOnly
	c.IsDefault = e.Source == broker.SourceDefault
	c.Source = kmsg.ConfigSource(e.Source)
	c.IsSensitive = e.Sensitive
	c.ConfigType = kmsg.ConfigType(e.Type)
	if docs && e.Doc != "" {
		d := e.Doc
		c.Documentation = &d
	}
	if synonyms {
		for _, syn := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name = syn.Name
			v := syn.Value
			cs.Value = &v
			cs.Source = kmsg.ConfigSource(syn.Source)
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}
