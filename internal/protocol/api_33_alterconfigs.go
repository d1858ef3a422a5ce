package protocol

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleAlterConfigs (key 33, v0-2) is the legacy whole-state alter: the
// configs given become the topic's complete set of overrides; configs not
// named revert to their defaults.
func (s *Server) handleAlterConfigs(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.alterConfigs(rr, req.ValidateOnly)
		sr.ErrorCode = errCode(err)
		sr.ErrorMessage = errMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return reply{msg: resp}, nil
}

func (s *Server) alterConfigs(rr kmsg.AlterConfigsRequestResource, validateOnly bool) error {
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
	return s.b.SetTopicConfigs(rr.ResourceName, overrides, validateOnly)
}

// checkAlterResource accepts topic resources; broker settings are static.
func (s *Server) checkAlterResource(typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case resourceTopic:
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
