package protocol

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDeleteTopics (key 20, v1-6) deletes topics by name, or by id (v6+).
func (s *Server) handleDeleteTopics(ctx context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	if req.Version >= 6 {
		for _, t := range req.Topics {
			targets = append(targets, target{t.Topic, t.TopicID})
		}
	} else {
		for _, n := range req.TopicNames {
			n := n
			targets = append(targets, target{name: &n})
		}
	}
	// Resolve every target, then delete the named topics together
	// (broker.DeleteTopics: metadata written once, logs removed in
	// parallel); in a cluster each goes through the metadata store.
	ctx, cancel := requestTimeout(ctx, req.TimeoutMillis)
	defer cancel()
	errs := make([]error, len(targets))
	var names []string
	var which []int
	for i, tg := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = tg.name, tg.id
		switch {
		case s.cfg.Cluster != nil:
			errs[i] = s.deleteClusterTopic(ctx, &rt, tg.name, tg.id)
		case tg.name != nil:
			if t := s.b.Topic(*tg.name); t != nil {
				rt.TopicID = t.ID
			}
			names, which = append(names, *tg.name), append(which, i)
		default:
			t := s.b.TopicByID(uuid.UUID(tg.id))
			if t == nil {
				errs[i] = fmt.Errorf("topic id %s: %w", uuid.UUID(tg.id), kerr.UnknownTopicID)
				break
			}
			name := t.Name
			rt.Topic = &name
			names, which = append(names, name), append(which, i)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(names) > 0 {
		for k, err := range s.b.DeleteTopics(names) {
			errs[which[k]] = err
		}
	}
	for i := range resp.Topics {
		resp.Topics[i].ErrorCode = errCode(errs[i])
		resp.Topics[i].ErrorMessage = errMessage(errs[i])
	}
	return reply{msg: resp}, nil
}

// deleteClusterTopic deletes a topic named by name or id through the
// cluster; it is answered once no broker serves it.
//
// A topic id is resolved on a view synced with the store (Kafka's
// controller resolves it on its committed state): a topic created through
// another broker just before is found by its id too.
func (s *Server) deleteClusterTopic(ctx context.Context, rt *kmsg.DeleteTopicsResponseTopic, name *string, id [16]byte) error {
	v := s.cfg.Cluster.View()
	if name == nil {
		var err error
		if v, err = s.cfg.Cluster.SyncView(ctx); err != nil {
			return err
		}
	}
	if name == nil {
		t := v.TopicsByID[uuid.UUID(id).String()]
		if t == nil {
			return fmt.Errorf("topic id %s: %w", uuid.UUID(id), kerr.UnknownTopicID)
		}
		n := t.Name
		rt.Topic, name = &n, &n
	} else if t := v.Topics[*name]; t != nil {
		if tid, err := uuid.Parse(t.ID); err == nil {
			rt.TopicID = tid
		}
	}
	return s.cfg.Cluster.DeleteTopic(ctx, *name)
}
