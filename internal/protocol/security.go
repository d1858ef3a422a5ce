package protocol

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/strata-io/strata/internal/authz"
	"github.com/strata-io/strata/internal/quota"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SecurityStore keeps ACLs and client quotas where every broker sees them
// (the cluster metadata). Each method returns once the change is stored and
// this broker's Authorizer or quota Manager holds it.
type SecurityStore interface {
	// CreateACLs stores bindings (already validated); existing ones are
	// kept once.
	CreateACLs(ctx context.Context, acls []authz.ACL) error
	// DeleteMatchingACLs removes the bindings the filters match and
	// returns them per filter (nil with an error that left the store
	// unchanged), matched and deleted at one point of the store's order.
	DeleteMatchingACLs(ctx context.Context, filters []authz.Filter) ([][]authz.ACL, error)
	// AlterQuotas applies alterations (already validated) to the current
	// quotas, all or none.
	AlterQuotas(ctx context.Context, alts []QuotaAlteration) error
}

// QuotaAlteration is one entity's changes in an AlterClientQuotas request.
type QuotaAlteration struct {
	Entity quota.Entity
	Ops    []quota.Op
}

// clientAddr is the IP of a connection's peer (nil when not TCP).
func clientAddr(nc net.Conn) net.IP {
	if a, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP
	}
	return nil
}

// setPrincipal makes p the connection's principal (Kafka's
// DefaultKafkaPrincipalBuilder: User:ANONYMOUS on PLAINTEXT and on SSL
// without a client certificate, the mapped certificate subject on SSL, the
// SASL user on SASL listeners).
func (c *conn) setPrincipal(p authz.Principal) {
	c.principal = p
	c.subject = authz.NewSubject(p, clientAddr(c.nc))
}

// tlsPrincipal sets the principal of a TLS connection from its client
// certificate, mapped by ssl.principal.mapping.rules; false when the rules
// map no name (Kafka fails the authentication: the connection closes).
// SASL_SSL connections take their principal from SASL instead.
func (c *conn) tlsPrincipal(tc *tls.Conn) bool {
	if len(c.l.SASLMechanisms) > 0 {
		return true
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return true // no client certificate: ANONYMOUS
	}
	m := c.l.PrincipalMapper
	if m == nil {
		m, _ = authz.ParseMappingRules(authz.DefaultMappingRules)
	}
	p, err := authz.CertificatePrincipal(certs[0], m)
	if err != nil {
		c.s.logger.Warn("closing connection: no principal for the client certificate", "remote", c.remote, "err", err)
		return false
	}
	c.setPrincipal(p)
	return true
}

// allowed reports whether the connection's principal may perform op on a
// resource (always, without an authorizer, and for in-process callers
// without a connection).
func (c *conn) allowed(op authz.Operation, rt authz.ResourceType, name string) bool {
	if c == nil || c.itself || c.s.cfg.Authorizer == nil {
		return true
	}
	return c.s.cfg.Authorizer.Authorize(c.subject, op, rt, name)
}

// allowedCluster is allowed on the CLUSTER resource.
func (c *conn) allowedCluster(op authz.Operation) bool {
	return c.allowed(op, authz.ResourceCluster, authz.ClusterName)
}

// authorizedOps is the authorized-operations bit field of a resource
// (Kafka's AuthHelper.authorizedOperations; every supported operation
// without an authorizer).
func (c *conn) authorizedOps(rt authz.ResourceType, name string) int32 {
	if c == nil || c.itself || c.s.cfg.Authorizer == nil {
		var bits int32
		for _, op := range authz.SupportedOperations(rt) {
			bits |= 1 << uint(op)
		}
		return bits
	}
	return c.s.cfg.Authorizer.AuthorizedOperations(c.subject, rt, name)
}

// topicFilter caches one request's decisions per topic name (Kafka's
// AuthHelper.filterByAuthorized asks once per distinct name).
type topicFilter struct {
	c    *conn
	op   authz.Operation
	seen map[string]bool
}

func (c *conn) topics(op authz.Operation) *topicFilter {
	return &topicFilter{c: c, op: op}
}

// ok reports whether the topic is authorized.
func (f *topicFilter) ok(topic string) bool {
	if f.c == nil || f.c.itself || f.c.s.cfg.Authorizer == nil {
		return true
	}
	if v, hit := f.seen[topic]; hit {
		return v
	}
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	v := f.c.allowed(f.op, authz.ResourceTopic, topic)
	f.seen[topic] = v
	return v
}

// Quotas (Kafka's ClientQuotaManager family, KIP-13, KIP-124, KIP-219,
// KIP-599): after a request is handled its usage is recorded against the
// connection's user and the request's client id; a violation sets the
// response's throttle_time_ms, and the connection is muted (its next
// request is not handled) until the throttle time has passed.

// throttleExempt are keys the request quota does not apply to: the SASL
// exchange (Kafka authenticates before requests reach its quota managers).
func throttleExempt(key int16) bool { return key == 17 || key == 36 }

// applyQuotas records a handled request's usage and throttles the
// connection when a quota is exceeded. busy is the time the request kept
// the broker busy (waits excluded).
func (c *conn) applyQuotas(req request, rep *reply, busy time.Duration) {
	q := c.s.cfg.Quotas
	if q == nil || c.itself || req.raw || req.msg == nil || throttleExempt(req.key) {
		return
	}
	user, client := c.principal.Name, req.clientID
	var throttle int64
	kind := "request"
	worst := func(ms int64, k string) {
		if ms > throttle {
			throttle, kind = ms, k
		}
	}
	switch req.key {
	case 0: // Produce: bandwidth on the request size; no request quota for acks=0
		worst(q.Record(quota.Produce, user, client, float64(req.size)), "produce")
		if pr, ok := req.msg.(*kmsg.ProduceRequest); ok && pr.Acks != 0 {
			worst(q.Record(quota.Request, user, client, quota.RequestTime(busy)), "request")
		}
	case 1: // Fetch: a throttled fetch is answered empty and its bytes unrecorded
		worst(q.Record(quota.Request, user, client, quota.RequestTime(busy)), "request")
		if fr := rep.fetch; fr != nil {
			if bw := q.Record(quota.Fetch, user, client, float64(fr.bytes)); bw > 0 || throttle > 0 {
				q.Unrecord(quota.Fetch, user, client, float64(fr.bytes))
				worst(bw, "fetch")
				c.s.emptyThrottledFetch(fr)
			}
		}
	default:
		worst(q.Record(quota.Request, user, client, quota.RequestTime(busy)), "request")
	}
	worst(rep.throttleMs, "controller_mutation")
	if throttle <= 0 {
		return
	}
	c.s.metrics.throttled.WithLabelValues(kind).Inc()
	c.s.metrics.throttleSeconds.WithLabelValues(kind).Add(float64(throttle) / 1000)
	ms := int32(min(throttle, 1<<31-1))
	switch {
	case rep.fetch != nil:
		rep.fetch.throttleMs = ms
	case rep.msg != nil:
		if t, ok := rep.msg.(kmsg.SetThrottleResponse); ok {
			t.SetThrottle(ms)
		}
	}
	c.throttleUntil = time.Now().Add(time.Duration(throttle) * time.Millisecond)
}

// emptyThrottledFetch turns a fetch answer into Kafka's throttled answer
// (FetchContext.getThrottledResponse): no partitions; a full fetch that
// opened a session closes it again (session id 0, so the client starts
// over), an incremental one keeps its session.
func (s *Server) emptyThrottledFetch(fr *fetchReply) {
	fr.release()
	fr.topics, fr.bytes = nil, 0
	if fr.newSession {
		s.sessions.close(fr.sessionID)
		fr.sessionID = 0
	}
}

// close drops a session (released now, or by the fetch running on it).
func (fs *fetchSessions) close(id int32) {
	fs.mu.Lock()
	gone := fs.closeLocked(id, nil)
	fs.mu.Unlock()
	for _, s := range gone {
		s.release()
	}
}

// waitThrottle holds the connection's next request until its throttle
// time has passed (Kafka mutes the channel), or the reader stops (the
// client left) or the server shuts down.
func (c *conn) waitThrottle(readerDone <-chan struct{}) {
	d := time.Until(c.throttleUntil)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-readerDone:
	case <-c.s.ctx.Done():
	}
}

// fetchQuotaCap caps a fetch's max bytes at what the client's
// consumer_byte_rate allows in one quota window (Kafka's KafkaApis caps
// fetchMaxBytes with getMaxValueInQuotaWindow: more would be throttled
// for sure).
func (c *conn) fetchQuotaCap(maxBytes int64) int64 {
	if c == nil || c.s.cfg.Quotas == nil {
		return maxBytes
	}
	if w := c.s.cfg.Quotas.MaxValueInWindow(quota.Fetch, c.principal.Name, c.clientID); w < float64(maxBytes) {
		return max(int64(w), 1)
	}
	return maxBytes
}

// waitFill is fetchFill.wait, with the time waited left out of the
// request quota.
func (c *conn) waitFill(ctx context.Context, fl *fetchFill, d time.Duration) bool {
	start := time.Now()
	ok := fl.wait(ctx, d)
	if c != nil {
		c.busyOff += time.Since(start)
	}
	return ok
}

// deniedFetch answers a follower's fetch without CLUSTER_ACTION on the
// cluster: every partition TOPIC_AUTHORIZATION_FAILED (Kafka's
// handleFetchRequest).
func deniedFetch(req *kmsg.FetchRequest) *fetchReply {
	fr := &fetchReply{version: req.Version}
	for _, t := range req.Topics {
		ft := fetchTopic{name: t.Topic}
		for _, p := range t.Partitions {
			ft.parts = append(ft.parts, fetchPart{partition: p.Partition, errorCode: kerr.TopicAuthorizationFailed.Code, hw: -1, lso: -1, logStart: -1})
		}
		fr.topics = append(fr.topics, ft)
	}
	return fr
}
