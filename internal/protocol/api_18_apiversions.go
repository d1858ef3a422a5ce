package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleApiVersions (key 18, v0-4) lists every served API key with its
// exact version range.
func (s *Server) handleApiVersions(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	for _, key := range s.apiKeys() {
		h := s.handlers[key]
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = key, h.min, h.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return reply{msg: resp}, nil
}

// apiVersionsUnsupported answers an ApiVersions request at a version above
// the served range (KIP-511): a v0 response with UNSUPPORTED_VERSION that
// still lists the ApiVersions range, so the client retries lower.
func (s *Server) apiVersionsUnsupported() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	h := s.handlers[18]
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = 18, h.min, h.max
	resp.ApiKeys = append(resp.ApiKeys, k)
	return resp
}
