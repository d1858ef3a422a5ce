package protocol

import (
	"context"
	"fmt"
	"sort"

	"github.com/strata-io/strata/internal/broker"
	"github.com/strata-io/strata/internal/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scramMechanism maps Kafka's SCRAM mechanism numbers (1 SCRAM-SHA-256,
// 2 SCRAM-SHA-512) to names ("" for unknown).
func scramMechanism(m int8) string {
	switch m {
	case 1:
		return sasl.ScramSHA256
	case 2:
		return sasl.ScramSHA512
	}
	return ""
}

// scramMechanismNum is the inverse of scramMechanism.
func scramMechanismNum(name string) int8 {
	switch name {
	case sasl.ScramSHA256:
		return 1
	case sasl.ScramSHA512:
		return 2
	}
	return 0
}

// handleDescribeUserScramCredentials (key 50, v0) lists users' SCRAM
// mechanisms and iterations (never salts or keys): every user for a null
// or empty list; RESOURCE_NOT_FOUND for a named user without credentials,
// DUPLICATE_RESOURCE for a user named twice. No authorizer: any client
// may ask.
func (s *Server) handleDescribeUserScramCredentials(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	all := s.b.DescribeScram()
	result := func(user string, infos []broker.ScramInfo) {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = user
		for _, in := range infos {
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramMechanismNum(in.Mechanism), int32(in.Iterations)
			r.CredentialInfos = append(r.CredentialInfos, ci)
		}
		resp.Results = append(resp.Results, r)
	}
	if len(req.Users) == 0 {
		users := make([]string, 0, len(all))
		for u := range all {
			users = append(users, u)
		}
		sort.Strings(users)
		for _, u := range users {
			result(u, all[u])
		}
		return reply{msg: resp}, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range req.Users {
		if done[u.Name] {
			continue
		}
		done[u.Name] = true
		result(u.Name, nil)
		r := &resp.Results[len(resp.Results)-1]
		switch infos, ok := all[u.Name]; {
		case count[u.Name] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + u.Name)
		case !ok:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + u.Name)
		default:
			resp.Results = resp.Results[:len(resp.Results)-1]
			result(u.Name, infos)
		}
	}
	return reply{msg: resp}, nil
}

// handleAlterUserScramCredentials (key 51, v0) creates, replaces and
// deletes SCRAM credentials with Kafka's rules (see
// broker.AlterScram): one result per user, in the order users first
// appear; applied changes are on disk before the answer.
func (s *Server) handleAlterUserScramCredentials(_ context.Context, _ *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	seen := map[string]bool{}
	add := func(u string) {
		if !seen[u] {
			seen[u] = true
			order = append(order, u)
		}
	}
	dels := make([]broker.ScramDeletion, 0, len(req.Deletions))
	for _, d := range req.Deletions {
		add(d.Name)
		dels = append(dels, broker.ScramDeletion{User: d.Name, Mechanism: mechanismOrRaw(d.Mechanism)})
	}
	ups := make([]broker.ScramUpsertion, 0, len(req.Upsertions))
	for _, u := range req.Upsertions {
		add(u.Name)
		ups = append(ups, broker.ScramUpsertion{User: u.Name, Mechanism: mechanismOrRaw(u.Mechanism),
			Iterations: int(u.Iterations), Salt: u.Salt, SaltedPassword: u.SaltedPassword})
	}
	results := s.b.AlterScram(dels, ups)
	for _, u := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = u
		if err := results[u]; err != nil {
			r.ErrorCode, r.ErrorMessage = errCode(err), errMessage(err)
		}
		resp.Results = append(resp.Results, r)
	}
	return reply{msg: resp}, nil
}

// mechanismOrRaw names a SCRAM mechanism number, or describes an unknown
// one (which the broker rejects as UNSUPPORTED_SASL_MECHANISM).
func mechanismOrRaw(m int8) string {
	if n := scramMechanism(m); n != "" {
		return n
	}
	return fmt.Sprintf("unknown mechanism %d", m)
}
