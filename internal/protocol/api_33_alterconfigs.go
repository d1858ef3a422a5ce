package protocol

import (
	"context"
	"fmt"
	"strconv"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/meta"
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
	if err := s.checkAlterResource(ctx, rr.ResourceType, rr.ResourceName); err != nil {
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
	if rr.ResourceType == resourceBroker {
		return s.alterBroker(ctx, rr.ResourceName, func(map[string]string) (map[string]string, error) { return overrides, nil }, validateOnly)
	}
	if s.cfg.Cluster != nil {
		return s.alterTopic(ctx, rr.ResourceName, func(map[string]string) (map[string]string, error) { return overrides, nil }, validateOnly)
	}
	return s.b.SetTopicConfigs(rr.ResourceName, overrides, validateOnly)
}

// alterBroker changes the dynamic configs of a BROKER resource in the
// cluster metadata: name is a node id or "" for the cluster default
// (Kafka's DynamicBrokerConfig); edit computes the new set from the stored
// one.
func (s *Server) alterBroker(ctx context.Context, name string, edit func(map[string]string) (map[string]string, error), validateOnly bool) error {
	scope, err := brokerScope(name)
	if err != nil {
		return err
	}
	if s.cfg.Cluster == nil {
		// Kafka's rules first, so a static setting is named as such.
		next, err := edit(map[string]string{})
		if err != nil {
			return err
		}
		if err := config.ValidateDynamic(next, scope != meta.DefaultBrokerScope); err != nil {
			return fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
		}
		return fmt.Errorf("dynamic broker configs live in the cluster metadata store, and this node runs without one: set broker settings in the config file, environment or flags: %w", kerr.InvalidConfig)
	}
	ctx, cancel := requestTimeout(ctx, 0)
	defer cancel()
	return s.cfg.Cluster.AlterBrokerConfigs(ctx, scope, edit, validateOnly)
}

// brokerScope parses a BROKER resource name: "" is the cluster default,
// else a node id (Kafka's ConfigAdminManager: "Invalid broker name").
func brokerScope(name string) (int32, error) {
	if name == "" {
		return meta.DefaultBrokerScope, nil
	}
	n, err := strconv.ParseInt(name, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid broker name %q: a BROKER resource is a node id or the empty string (the cluster default): %w", name, kerr.InvalidRequest)
	}
	return int32(n), nil
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

// checkAlterResource checks a topic resource exists and a broker
// resource's name.
//
// In a cluster the topic is looked up in a view synced with the store
// (Kafka forwards AlterConfigs and IncrementalAlterConfigs to the
// controller, which decides on its committed state): a topic created
// through another broker just before exists here too, where this
// broker's watch may not have delivered it yet.
func (s *Server) checkAlterResource(ctx context.Context, typ kmsg.ConfigResourceType, name string) error {
	switch typ {
	case resourceTopic:
		if s.cfg.Cluster != nil {
			ctx, cancel := requestTimeout(ctx, 0)
			defer cancel()
			v, err := s.cfg.Cluster.SyncView(ctx)
			if err != nil {
				return err
			}
			if t := v.Topics[name]; t == nil || t.Deleting {
				return fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
			}
			return nil
		}
		if s.b.Topic(name) == nil {
			return fmt.Errorf("topic %q: %w", name, kerr.UnknownTopicOrPartition)
		}
		return nil
	case resourceBroker:
		_, err := brokerScope(name)
		return err
	default:
		return fmt.Errorf("resource type %d is not supported: %w", typ, kerr.InvalidRequest)
	}
}
