package protocol

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleDeleteTopics (key 20, v1-6) deletes topics by name, or by id (v6+).
func (s *Server) handleDeleteTopics(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
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
	// parallel).
	errs := make([]error, len(targets))
	var names []string
	var which []int
	for i, tg := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = tg.name, tg.id
		switch {
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
