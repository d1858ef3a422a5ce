package protocol

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/strata-io/strata/internal/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Incremental alter operations.
const (
	opSet      = kmsg.IncrementalAlterConfigOp(0)
	opDelete   = kmsg.IncrementalAlterConfigOp(1)
	opAppend   = kmsg.IncrementalAlterConfigOp(2)
	opSubtract = kmsg.IncrementalAlterConfigOp(3)
)

// handleIncrementalAlterConfigs (key 44, v0-1) applies SET, DELETE (revert
// to default), APPEND and SUBTRACT (list configs) to a topic's overrides;
// the resulting set is validated as a whole and applied atomically.
func (s *Server) handleIncrementalAlterConfigs(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		err := s.incrementalAlter(ctx, rr, req.ValidateOnly)
		sr.ErrorCode = errCode(err)
		sr.ErrorMessage = errMessage(err)
		resp.Resources = append(resp.Resources, sr)
	}
	return reply{msg: resp}, nil
}

func (s *Server) incrementalAlter(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) error {
	if err := s.checkAlterResource(ctx, rr.ResourceType, rr.ResourceName); err != nil {
		return err
	}
	if rr.ResourceType == resourceBroker {
		return s.alterBroker(ctx, rr.ResourceName, func(cur map[string]string) (map[string]string, error) {
			return s.applyIncrementalBroker(cur, rr.Configs)
		}, validateOnly)
	}
	if s.cfg.Cluster != nil {
		return s.alterTopic(ctx, rr.ResourceName, func(cur map[string]string) (map[string]string, error) {
			return s.applyIncremental(cur, rr.Configs)
		}, validateOnly)
	}
	t := s.b.Topic(rr.ResourceName)
	if t == nil {
		return fmt.Errorf("topic %q: %w", rr.ResourceName, kerr.UnknownTopicOrPartition)
	}
	overrides, err := s.applyIncremental(maps.Clone(t.Configs), rr.Configs)
	if err != nil {
		return err
	}
	return s.b.SetTopicConfigs(rr.ResourceName, overrides, validateOnly)
}

// applyIncremental applies SET, DELETE, APPEND and SUBTRACT to a topic's
// overrides.
func (s *Server) applyIncremental(overrides map[string]string, cs []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	return applyOps(overrides, cs, func(name string) (config.Type, string, bool) {
		st, known := config.LookupTopic(name)
		if !known {
			return 0, "", false
		}
		cur, _, _ := s.b.Config().TopicDefault(name)
		return st.Type, cur, true
	}, "topic")
}

// applyIncrementalBroker applies SET, DELETE, APPEND and SUBTRACT to a
// broker resource's dynamic configs (the value appended to, when the
// resource has none, is this broker's current one). Names are checked
// with the whole set afterwards (config.ValidateDynamic).
func (s *Server) applyIncrementalBroker(dyn map[string]string, cs []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	return applyOps(dyn, cs, func(name string) (config.Type, string, bool) {
		st, known := config.LookupBroker(name)
		if !known {
			return 0, "", true // refused with the set, by name
		}
		return st.Type, s.b.Config().Get(name), true
	}, "broker")
}

// applyOps applies IncrementalAlterConfigs' operations to a config set;
// lookup gives a name's type and the value APPEND/SUBTRACT start from when
// the set has none.
func applyOps(overrides map[string]string, cs []kmsg.IncrementalAlterConfigsRequestResourceConfig, lookup func(string) (config.Type, string, bool), kind string) (map[string]string, error) {
	if overrides == nil {
		overrides = map[string]string{}
	}
	seen := map[string]bool{}
	for _, c := range cs {
		if seen[c.Name] {
			return nil, fmt.Errorf("config %s given twice: %w", c.Name, kerr.InvalidRequest)
		}
		seen[c.Name] = true
		typ, def, known := lookup(c.Name)
		if !known {
			return nil, fmt.Errorf("unknown %s config %q: %w", kind, c.Name, kerr.InvalidConfig)
		}
		switch c.Op {
		case opSet:
			if c.Value == nil {
				return nil, fmt.Errorf("null value for config %s: %w", c.Name, kerr.InvalidConfig)
			}
			overrides[c.Name] = *c.Value
		case opDelete:
			delete(overrides, c.Name)
		case opAppend, opSubtract:
			if typ != config.TypeList {
				return nil, fmt.Errorf("config %s is not a list, so it cannot be appended to or subtracted from: %w", c.Name, kerr.InvalidRequest)
			}
			if c.Value == nil {
				return nil, fmt.Errorf("null value for config %s: %w", c.Name, kerr.InvalidConfig)
			}
			cur, ok := overrides[c.Name]
			if !ok {
				cur = def
			}
			overrides[c.Name] = editList(cur, *c.Value, c.Op == opAppend)
		default:
			return nil, fmt.Errorf("unknown alter op %d for config %s: %w", c.Op, c.Name, kerr.InvalidRequest)
		}
	}
	return overrides, nil
}

// editList appends (without duplicates) or removes the comma-separated
// items of change to/from the list cur.
func editList(cur, change string, add bool) string {
	var items []string
	for _, it := range strings.Split(cur, ",") {
		if it = strings.TrimSpace(it); it != "" {
			items = append(items, it)
		}
	}
	for _, ch := range strings.Split(change, ",") {
		ch = strings.TrimSpace(ch)
		if ch == "" {
			continue
		}
		idx := -1
		for i, it := range items {
			if it == ch {
				idx = i
				break
			}
		}
		switch {
		case add && idx < 0:
			items = append(items, ch)
		case !add && idx >= 0:
			items = append(items[:idx], items[idx+1:]...)
		}
	}
	return strings.Join(items, ",")
}
