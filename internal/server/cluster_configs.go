package server

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/config"
	"github.com/strata-io/strata/internal/meta"
)

// Dynamic broker configs (docs/cluster.md "Dynamic broker configs"): the
// cluster default and each broker's own live in the metadata store
// (/strata/configs/brokers/{default,<id>}); every broker lays them over its
// static settings (config.Broker.WithDynamic) whenever its view of them
// changes, and applies the result before the rest of the view
// (cluster_topics.go applyView).

// dynamicConfig is the configuration computed from one pair of dynamic
// config maps (memoized: the maps rarely change).
type dynamicConfig struct {
	def, own map[string]string
	cfg      *config.Broker
}

// configFor returns this node's configuration under the dynamic broker
// configs of v: the static settings with the cluster default and this
// broker's dynamic configs laid over them. Configs that cannot be applied
// (not dynamic in Strata, a bad value: written by another version or by
// hand) are logged and left out.
func (s *Server) configFor(v *meta.View) *config.Broker {
	def, own := v.BrokerConfigs[meta.DefaultBrokerScope], v.BrokerConfigs[int32(s.cfg.Int("node.id"))]
	if d := s.dyn.Load(); d != nil && maps.Equal(d.def, def) && maps.Equal(d.own, own) {
		return d.cfg
	}
	cfg, ignored, err := s.cfg.WithDynamic(def, own)
	if err != nil {
		s.logger.Error("dynamic broker configs in the cluster metadata cannot be applied; keeping the static configuration", "err", err)
		cfg, ignored, _ = s.cfg.WithDynamic(nil, nil)
	}
	if len(ignored) > 0 {
		s.logger.Warn("dynamic broker configs in the cluster metadata ignored (not updatable while running, or invalid)", "configs", ignored)
	}
	s.dyn.Store(&dynamicConfig{def: maps.Clone(def), own: maps.Clone(own), cfg: cfg})
	return cfg
}

// currentConfig is the node's configuration under the newest dynamic
// broker configs it knows.
func (s *Server) currentConfig() *config.Broker {
	if c := s.metaCache.Load(); c != nil {
		return s.configFor(c.View())
	}
	return s.broker.Config()
}

// applyDynamicConfig hands the broker the configuration of view v when its
// dynamic broker configs changed.
func (s *Server) applyDynamicConfig(v *meta.View) error {
	cfg := s.configFor(v)
	if cfg == s.broker.Config() {
		return nil
	}
	def, own := cfg.Dynamic()
	s.logger.Info("dynamic broker configs applied", "cluster_default", def, "broker", own)
	if err := s.broker.SetConfig(cfg); err != nil {
		return err
	}
	if p := s.protoLive.Load(); p != nil {
		lim, err := connectionLimits(cfg)
		if err != nil {
			return fmt.Errorf("connection limits: %w", err)
		}
		p.SetConnectionLimits(lim)
	}
	return nil
}

// AlterBrokerConfigs changes the dynamic configs of one broker (scope: its
// node id) or the cluster default (meta.DefaultBrokerScope) in the cluster
// metadata: edit gives the new set from the stored one; the result is
// validated (Kafka's DynamicBrokerConfig.validateConfigs rules plus every
// value applicable by Strata) before it is written. It returns once this
// broker applies it; the others apply it from their views.
func (a clusterAPI) AlterBrokerConfigs(ctx context.Context, scope int32, edit func(map[string]string) (map[string]string, error), validateOnly bool) error {
	err := a.c.admin.AlterBrokerConfigs(ctx, scope, func(cur map[string]string) (map[string]string, error) {
		next, err := edit(cur)
		if err != nil {
			return nil, err
		}
		return next, a.s.validateBrokerConfigs(scope, next)
	}, validateOnly)
	if err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return err
		}
		return adminError(err)
	}
	if validateOnly {
		return nil
	}
	return adminError(a.c.waitApplied(ctx))
}

// validateBrokerConfigs checks a new set of dynamic configs of scope: the
// names and values (config.ValidateDynamic), and the configuration this
// broker would run with (the rules between settings; every topic's
// configuration still resolving). Errors wrap INVALID_CONFIG.
func (s *Server) validateBrokerConfigs(scope int32, next map[string]string) error {
	me := int32(s.cfg.Int("node.id"))
	if err := config.ValidateDynamic(next, scope != meta.DefaultBrokerScope); err != nil {
		return wrapInvalid(err)
	}
	v := s.cluster.cache.View()
	def, own := v.BrokerConfigs[meta.DefaultBrokerScope], v.BrokerConfigs[me]
	switch scope {
	case meta.DefaultBrokerScope:
		def = next
	case me:
		own = next
	default:
		own = next // another broker: checked over this broker's static settings
	}
	cfg, _, err := s.cfg.WithDynamic(def, own)
	if err != nil {
		return wrapInvalid(err)
	}
	for _, name := range v.TopicNames() {
		t := v.Topics[name]
		if err := validateTopicUnder(cfg, t); err != nil {
			return wrapInvalid(err)
		}
	}
	return nil
}

// validateTopicUnder checks that topic t's configuration resolves under
// the broker configuration cfg.
func validateTopicUnder(cfg *config.Broker, t *meta.Topic) error {
	if t.Deleting {
		return nil
	}
	return broker.ValidateTopicOverrides(cfg, t.Name, t.Internal, t.Configs)
}

// wrapInvalid makes err an INVALID_CONFIG error (unless it is a Kafka
// error already).
func wrapInvalid(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return err
	}
	return fmt.Errorf("%v: %w", err, kerr.InvalidConfig)
}
