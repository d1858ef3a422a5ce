package group

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/record"
)

// groupOperations is the ACL operation bitfield reported for groups when
// asked (Strata has no ACLs): READ, DELETE, DESCRIBE.
const groupOperations = 1<<3 | 1<<6 | 1<<8

// snapshot returns the live groups sorted by id.
func (c *Coordinator) snapshot() []*group {
	c.mu.Lock()
	gs := slices.Collect(maps.Values(c.groups))
	c.mu.Unlock()
	sort.Slice(gs, func(i, j int) bool { return gs[i].id < gs[j].id })
	return gs
}

func (c *Coordinator) listGroups(r *kmsg.ListGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	if c.loading() {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		return resp
	}
	match := func(filter []string, v string) bool {
		if len(filter) == 0 {
			return true
		}
		for _, f := range filter {
			if strings.EqualFold(f, v) {
				return true
			}
		}
		return false
	}
	for _, g := range c.snapshot() {
		g.mu.Lock()
		dead, st, pt, typ := g.state == stateDead, g.stateName(), g.protocolType, g.typeName()
		g.mu.Unlock()
		if dead || !match(r.StatesFilter, st) || !match(r.TypesFilter, typ) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.id, pt, st, typ
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}

func (c *Coordinator) describeGroups(r *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		if r.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = groupOperations
		}
		if code := c.status(id); code != 0 {
			dg.ErrorCode = code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g := c.lockGroup(id, false)
		if g == nil {
			dg.State = stateDead.String()
			if r.Version >= 6 {
				dg.ErrorCode = kerr.GroupIDNotFound.Code
				msg := "group " + id + " not found"
				dg.ErrorMessage = &msg
			}
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg.State, dg.ProtocolType = g.stateName(), g.protocolType
		if g.consumer != nil {
			dg.Members = g.consumer.classicView(&dg)
		}
		stable := g.state == stateStable && g.consumer == nil
		if stable {
			dg.Protocol = g.protocol
		}
		for _, m := range g.members {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
			dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
			if stable {
				dm.ProtocolMetadata = m.metadataFor(g.protocol)
				dm.MemberAssignment = m.assignment
			}
			dg.Members = append(dg.Members, dm)
		}
		g.mu.Unlock()
		sort.Slice(dg.Members, func(i, j int) bool { return dg.Members[i].MemberID < dg.Members[j].MemberID })
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) deleteGroups(ctx context.Context, r *kmsg.DeleteGroupsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		dg.ErrorCode = c.deleteGroup(ctx, id)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// deleteGroup writes tombstones for an Empty group's metadata and offsets,
// then forgets it.
func (c *Coordinator) deleteGroup(ctx context.Context, id string) int16 {
	g, code := c.lockExisting(id, kerr.GroupIDNotFound.Code)
	if g == nil {
		return code
	}
	defer g.mu.Unlock()
	if g.state != stateEmpty || len(g.members) > 0 {
		return kerr.NonEmptyGroup.Code
	}
	if err := c.appendRecordsWait(g, g.tombstones(nil, true)); err != nil {
		c.logger.Warn("store group deletion", "group", g.id, "err", err)
		return storeErrorCode(err, kerr.UnknownServerError.Code)
	}
	g.offsets = map[tp]offset{}
	c.removeGroup(g)
	return 0
}

// tombstones returns null-value records for the given offsets (when ks is
// nil: all offsets, committed or pending in a transaction) and, with
// withGroup, the group metadata.
func (g *group) tombstones(ks []tp, withGroup bool) []record.Record {
	if ks == nil {
		for k := range g.offsets {
			ks = append(ks, k)
		}
		for _, m := range g.txn {
			for k := range m {
				if _, ok := g.offsets[k]; !ok && !slices.Contains(ks, k) {
					ks = append(ks, k)
				}
			}
		}
	}
	sortTPs(ks)
	recs := make([]record.Record, 0, len(ks)+1)
	for _, k := range ks {
		recs = append(recs, record.Record{Key: offsetKey(g.id, k)})
	}
	if withGroup {
		recs = append(recs, record.Record{Key: groupKey(g.id)})
		recs = append(recs, g.consumerTombstones()...)
	}
	return recs
}
