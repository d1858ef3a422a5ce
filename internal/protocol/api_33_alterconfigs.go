package protocol

import (
	"context"
	"fmt"

	"github.com/strata-io/strata/internal/broker"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleAlterConfigs (key 33, v0-2) is the legacy whole-state alter: the
// configs given become the topic's complete set of overrides; configs not
// named revert to their defaults.
func (s *Server) handleAlterConfigs(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.alterConfigs(ctx, rr, req.ValidateOnly)
		sr.ErrorCode = errCode(err)
		sr.ErrorMessage = errMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return reply{msg: resp}, nil
}

func (s *Server) alterConfigs(ctx context.Context, rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
	if err := s.checkAlterResource(rr.ResourceType, rr.ResourceName); err != nil {
		return err
	}
	overrides := map[string]string{}
	for _, c := range rr.Configs {
		if _, dup := overrides[c.Name]; dup {
			return fmt.Errorf("config %s given twice: %w", c.Name, kerr.InvalidRequest)
		}
		if c.Value == nil {
			return fmt.Errorf("null value for config %s: %w", c.Name, kerr.InvalidConfig)
		}
		overrides[c.Name] = *c.Value
	}
	if s.cfg.Cluster != nil {
		return s.alterTopic(ctx, rr.ResourceName, func(map[string]string) (map[string]string, error) { return overrides, nil }, validateOnly)
	}
	return s.b.SetTopicConfigs(rr.ResourceName, overrides, validateOnly)
}

// alterTopic changes a topic's configs in the cluster metadata: edit
// computes the new overrides from the stored ones, which are validated
// as a whole before they are written.
func (s *Server) alterTopic(ctx context.Context, name string, edit func(map[string]string) (map[string]string, error), validateOnly bool) error {
	ctx, cancel := requestTimeout(ctx, 0)
	defer cancel()
	internal := false
	if t := s.cfg.Cluster.View().Topics[name]; t != nil {
		internal = t.Internal
	}
	return s.cfg.Cluster.AlterTopicConfigs(ctx, name, func(cur map[string]string) (map[string]string, error) {
		next, err := edit(cur)
		if err != nil {
			return nil, err
		}
		return next, broker.ValidateTopicOverrides(s.b.Config(), name, internal, next)
	}, validateOnly)
}

// checkAlterResource accepts topic resources; broker settings are static.
func (s *Server) checkAlterResource(typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case resourceTopic:
		if s.cfg.Cluster != nil {
			if t := s.cfg.Cluster.View().Topics[name]; t == nil || t.Deleting {
				return fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
			}
			return nil
		}
		if s.b.Topic(name) == nil {
			return fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
		}
		return nil
	case resourceBroker:
		return fmt.Errorf("broker settings are static in Strata (set them in the config file, environment or flags): %w", kerr.InvalidConfig)
	default:
		return fmt.Errorf("resource type %d is not supported: %w", typ, kerr.InvalidRequest)
	}
}
