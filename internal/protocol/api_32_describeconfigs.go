package protocol

import (
	"context"
	"fmt"
	"strconv"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
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
		if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(s.b.NodeID())) {
			return nil, fmt.Errorf("broker %q is not this node (%d): %w", rr.ResourceName, s.b.NodeID(), kerr.InvalidRequest)
		}
		return s.brokerEntries(), nil
	default:
		return nil, fmt.Errorf("resource type %d is not supported: %w", rr.ResourceType, kerr.InvalidRequest)
	}
}

// brokerEntries lists the broker settings (static, hence read-only).
func (s *Server) brokerEntries() []broker.ConfigEntry {
	cfg := s.b.Config()
	var out []broker.ConfigEntry
	for _, st := range config.BrokerSettings() {
		e := broker.ConfigEntry{Name: st.Name, Value: cfg.Get(st.Name), ReadOnly: true, Type: st.Type, Doc: st.Doc, Source: broker.SourceDefault}
		if cfg.IsSet(st.Name) {
			e.Source = broker.SourceStaticBroker
			e.Synonyms = append(e.Synonyms, broker.ConfigSynonym{Name: st.Name, Value: e.Value, Source: broker.SourceStaticBroker})
		}
		if st.Default != "" {
			e.Synonyms = append(e.Synonyms, broker.ConfigSynonym{Name: st.Name, Value: st.Default, Source: broker.SourceDefault})
		}
		e.Null = e.Value == ""
		if st.Type == config.TypePassword { // private keys: never on the wire (Kafka: null, is_sensitive)
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
