package protocol

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// handleApiVersions (key 18, v0-4) lists every served API key with its
// exact version range. From v3 on, a client software name or version that
// does not match Kafka's pattern is answered INVALID_REQUEST with no keys
// (ApiVersionsRequest.isValid and getErrorResponse; KafkaApis answers it
// and keeps the connection).
func (s *Server) handleApiVersions(_ context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!validSoftwareName(req.ClientSoftwareName) || !validSoftwareName(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return reply{msg: resp}, nil
	}
	for _, key := range s.apiKeys() {
		h := s.handlers[key]
		if c != nil && (key == 17 || key == 36) && len(c.l.SASLMechanisms) == 0 {
			continue // SASL keys on SASL listeners only
		}
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

// validSoftwareName reports whether v matches Kafka's
// SOFTWARE_NAME_VERSION_PATTERN, [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
// (KIP-511): ASCII letters and digits, with '-' and '.' inside only.
func validSoftwareName(v string) bool {
	if v == "" || !alnum(v[0]) || !alnum(v[len(v)-1]) {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		if c := v[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
