package protocol

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/strata-io/strata/internal/authz"
	"github.com/strata-io/strata/internal/quota"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaErr maps a quota validation error to Kafka's code and message.
func quotaErr(err error) (int16, *string) {
	code := kerr.InvalidRequest.Code
	prefix := quota.ErrInvalid.Error() + ": "
	if errors.Is(err, quota.ErrUnsupported) {
		code, prefix = kerr.UnsupportedVersion.Code, quota.ErrUnsupported.Error()+": "
	}
	return code, kmsg.StringPtr(strings.TrimPrefix(err.Error(), prefix))
}

// handleDescribeClientQuotas (key 48, v0-1) lists the quotas of the
// entities a filter selects (Kafka's KafkaApis.handleDescribeClientQuotasRequest
// and ClientQuotasImage.describe): DESCRIBE_CONFIGS on the cluster is
// required; a malformed filter is INVALID_REQUEST, an unknown entity type
// UNSUPPORTED_VERSION.
func (s *Server) handleDescribeClientQuotas(_ context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !c.allowedCluster(authz.OpDescribeConfigs) {
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, notAuthorized("DescribeClientQuotas")
		return reply{msg: resp}, nil
	}
	parts := make([]quota.FilterPart, len(req.Components))
	for i, comp := range req.Components {
		parts[i] = quota.FilterPart{Type: comp.EntityType, MatchType: int8(comp.MatchType), Match: comp.Match}
	}
	f, err := quota.ParseFilter(parts, req.Strict)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = quotaErr(err)
		return reply{msg: resp}, nil
	}
	for e, vals := range s.cfg.Quotas.Quotas() {
		if !f.Matches(e) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, p := range e.Parts() {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = p.Type, p.Name
			entry.Entity = append(entry.Entity, ee)
		}
		keys := make([]string, 0, len(vals))
		for k := range vals {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, vals[k]
			entry.Values = append(entry.Values, v)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	slices.SortFunc(resp.Entries, func(a, b kmsg.DescribeClientQuotasResponseEntry) int {
		return strings.Compare(entityString(a.Entity), entityString(b.Entity))
	})
	return reply{msg: resp}, nil
}

func entityString(es []kmsg.DescribeClientQuotasResponseEntryEntity) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString(e.Type)
		b.WriteByte('=')
		if e.Name == nil {
			b.WriteString("<default>")
		} else {
			b.WriteString(*e.Name)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// handleAlterClientQuotas (key 49, v0-1) sets and removes quotas (Kafka's
// ControllerApis.handleAlterClientQuotas and
// ClientQuotaControlManager.alterClientQuotas): ALTER_CONFIGS on the
// cluster is required; each entity is checked with Kafka's rules and
// messages (INVALID_REQUEST), the valid ones are applied together, unless
// validate_only. An entity named twice in one request fails both times.
func (s *Server) handleAlterClientQuotas(ctx context.Context, c *conn, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	resp.Entries = make([]kmsg.AlterClientQuotasResponseEntry, len(req.Entries))
	for i, e := range req.Entries {
		resp.Entries[i] = kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range e.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = p.Type, p.Name
			resp.Entries[i].Entity = append(resp.Entries[i].Entity, re)
		}
	}
	if !c.allowedCluster(authz.OpAlterConfigs) {
		for i := range resp.Entries {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = kerr.ClusterAuthorizationFailed.Code, notAuthorized("AlterClientQuotas")
		}
		return reply{msg: resp}, nil
	}
	alts := make([]*QuotaAlteration, len(req.Entries))
	count := map[quota.Entity]int{}
	for i, e := range req.Entries {
		parts := make([]quota.EntityPart, len(e.Entity))
		for j, p := range e.Entity {
			parts[j] = quota.EntityPart{Type: p.Type, Name: p.Name}
		}
		ent, err := quota.ParseEntity(parts)
		if err == nil {
			ops := make([]quota.Op, len(e.Ops))
			for j, op := range e.Ops {
				ops[j] = quota.Op{Key: op.Key, Value: op.Value, Remove: op.Remove}
			}
			if _, err = quota.Apply(nil, ops); err == nil {
				alts[i] = &QuotaAlteration{Entity: ent, Ops: ops}
				count[ent]++
			}
		}
		if err != nil {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = quotaErr(err)
		}
	}
	var valid []QuotaAlteration
	var validAt []int
	for i, a := range alts {
		if a == nil {
			continue
		}
		if count[a.Entity] > 1 {
			resp.Entries[i].ErrorCode = kerr.InvalidRequest.Code
			resp.Entries[i].ErrorMessage = kmsg.StringPtr("Ignoring duplicate entity " + a.Entity.String())
			continue
		}
		valid = append(valid, *a)
		validAt = append(validAt, i)
	}
	if len(valid) == 0 || req.ValidateOnly {
		return reply{msg: resp}, nil
	}
	if err := s.cfg.Security.AlterQuotas(ctx, valid); err != nil {
		s.logger.Warn("AlterClientQuotas failed", "err", err)
		for _, i := range validAt {
			resp.Entries[i].ErrorCode, resp.Entries[i].ErrorMessage = errCode(err), errMessage(err)
		}
	}
	return reply{msg: resp}, nil
}
