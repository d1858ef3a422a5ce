package group

import "sort"

// assign computes the target assignment of every member with the named
// assignor. prev is the previous target: the uniform assignor keeps a
// partition where it was when that stays balanced (fewer revocations).
func assign(name string, members map[string]*cmember, ix topicIndex, prev map[string]tpset) map[string]tpset {
	out := make(map[string]tpset, len(members))
	ids := make([]string, 0, len(members))
	subs := map[string]map[string]bool{}
	for id, m := range members {
		out[id] = tpset{}
		ids = append(ids, id)
		subs[id] = map[string]bool{}
		for _, t := range m.subscription(ix) {
			subs[id][t] = true
		}
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		return out
	}
	// Topics anyone subscribes to, sorted.
	topicSet := map[string]bool{}
	for _, s := range subs {
		for t := range s {
			topicSet[t] = true
		}
	}
	topics := make([]string, 0, len(topicSet))
	for t := range topicSet {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	if name == assignorRange {
		for _, t := range topics {
			var who []string
			for _, id := range ids {
				if subs[id][t] {
					who = append(who, id)
				}
			}
			n := ix.byName[t].Partitions
			per, extra := n/int32(len(who)), n%int32(len(who))
			p := int32(0)
			for i, id := range who {
				cnt := per
				if int32(i) < extra {
					cnt++
				}
				for j := int32(0); j < cnt; j++ {
					out[id][tp{t, p}] = struct{}{}
					p++
				}
			}
		}
		return out
	}
	// Uniform: balance partition counts, sticky to the previous target.
	var all []tp
	for _, t := range topics {
		for p := int32(0); p < ix.byName[t].Partitions; p++ {
			all = append(all, tp{t, p})
		}
	}
	quota := (len(all) + len(ids) - 1) / len(ids)
	owner := map[tp]string{}
	for id, s := range prev {
		for k := range s {
			owner[k] = id
		}
	}
	var rest []tp
	for _, k := range all {
		if id, ok := owner[k]; ok && out[id] != nil && subs[id][k.topic] && len(out[id]) < quota {
			out[id][k] = struct{}{}
			continue
		}
		rest = append(rest, k)
	}
	for _, k := range rest {
		best := ""
		for _, id := range ids {
			if subs[id][k.topic] && (best == "" || len(out[id]) < len(out[best])) {
				best = id
			}
		}
		if best != "" {
			out[best][k] = struct{}{}
		}
	}
	return out
}
