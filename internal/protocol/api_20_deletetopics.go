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
	for _, tg := range targets {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID = tg.name, tg.id
		var err error
		switch {
		case tg.name != nil:
			if t := s.b.Topic(*tg.name); t != nil {
				rt.TopicID = t.ID
			}
			err = s.b.DeleteTopic(*tg.name)
		default:
			t := s.b.TopicByID(uuid.UUID(tg.id))
			if t == nil {
				err = fmt.Errorf("topic id %s: %w", uuid.UUID(tg.id), kerr.UnknownTopicID)
				break
			}
			name := t.Name
			rt.Topic = &name
			err = s.b.DeleteTopic(name)
		}
		rt.ErrorCode = errCode(err)
		rt.ErrorMessage = errMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{msg: resp}, nil
}
