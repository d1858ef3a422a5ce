package group

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/clock"
	"github.com/strata-io/strata/internal/transcript"
)

// TestTranscripts runs the group coordinator transcripts of
// testdata/*.txt (run with -rewrite to regenerate the expected output):
// the classic protocol, the consumer protocol (KIP-848) and transactional
// offset commits, on one manual clock. Members are named by aliases (m1,
// m2, ...) bound to the member ids the coordinator hands out (KIP-848
// members use the alias as their id). Requests that wait (JoinGroup,
// SyncGroup) print "waiting" and their answer when it comes, under the
// command that caused it. Commands:
//
//	coordinator [initial-delay=D] [min-session=D] [max-session=D] [consumer-session=D]
//	            [max-size=N] [consumer-max-size=N]
//	                                   settings (first command; defaults 0s, 6s, 30m, 45s,
//	                                   no group size limits)
//	join GROUP M [instance=I] [session=10s] [rebalance=60s] [protocols=range,...]
//	     [meta=S] [id=none]            JoinGroup v9 (M's member id when known; id=none sends "")
//	sync GROUP M gen=N [assign=M1:a,M2:b]
//	                                   SyncGroup v5 (the leader's assignments)
//	heartbeat GROUP M gen=N            Heartbeat v4
//	leave GROUP M...                   LeaveGroup v4 (static members by instance id)
//	commit GROUP M gen=N TOPIC:P=OFFSET...
//	                                   OffsetCommit v8 (M "-" = no member)
//	fetch GROUP [stable TOPIC:P...]    OffsetFetch v8 of every committed offset, or with
//	                                   require_stable of the partitions named
//	describe GROUP                     state, generation, leader, members (KIP-848: epochs,
//	                                   assignor, each member's epoch, partitions, ->target)
//	topics NAME:PARTITIONS...          the topics the coordinator sees (default t:4 u:2)
//	hb GROUP M epoch=N [topics=a,b] [regex=R] [owned=t:0,t:1] [instance=I] [assignor=A]
//	   [rebalance=30s]                 ConsumerGroupHeartbeat v1 (no owned: a keepalive;
//	                                   owned= : none)
//	txncommit GROUP pid=N [epoch=E] [member=M gen=N] TOPIC:P=OFFSET...
//	                                   TxnOffsetCommit v3 of producer N
//	marker GROUP pid=N commit|abort [epoch=E]
//	                                   producer N's marker written to GROUP's partition
//	                                   and reported (CompleteTxn)
//	advance D                          move the clock (timers fire)
//	restart [max-size=N]               reload the coordinator from its log (with a new
//	                                   group.max.size)
func TestTranscripts(t *testing.T) {
	transcript.Run(t, "testdata/*.txt", func(t *testing.T) func(transcript.Command) string {
		s := &groupScript{t: t, clk: newFakeClock(), store: newMemStore(), ids: map[string]string{}, aliases: map[string]string{}}
		s.cfg = testConfig(s.clk)
		s.topics = defaultTopics
		s.cfg.Topics = func() []TopicInfo { return s.topics }
		s.cfg.Transactions = true
		t.Cleanup(func() {
			if s.c != nil {
				s.c.Close()
			}
		})
		return s.run
	})
}

// groupScript is one transcript's coordinator and what it knows of the
// members.
type groupScript struct {
	t     *testing.T
	clk   *clock.Manual
	store *memStore
	cfg   Config
	c     *Coordinator
	seq   int
	// topics is what cfg.Topics reports (the topics command).
	topics []TopicInfo

	ids       map[string]string // alias -> member id
	aliases   map[string]string // member id -> alias
	instances map[string]string // alias -> group.instance.id
	waiting   []*pending
}

// pending is a JoinGroup or SyncGroup sent in its own goroutine.
type pending struct {
	alias, group, api, instance string
	pos                         string // the command that sent it
	ch                          chan kmsg.Response
}

func (s *groupScript) start() {
	c, err := NewCoordinator(s.cfg, s.store, nil, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	// Member ids are "<client id or instance id>-<n>" so that transcripts
	// are deterministic (Kafka appends a UUID).
	c.env.newMemberID = func(prefix string) string {
		s.seq++
		return prefix + "-" + strconv.Itoa(s.seq)
	}
	if err := c.Load(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	s.c = c
}

func (s *groupScript) run(cmd transcript.Command) string {
	if cmd.Name == "coordinator" {
		if s.c != nil {
			cmd.Fatalf("coordinator must come first")
		}
		s.cfg.InitialRebalanceDelay = cmd.Duration("initial-delay", 0)
		s.cfg.MinSessionTimeout = cmd.Duration("min-session", s.cfg.MinSessionTimeout)
		s.cfg.MaxSessionTimeout = cmd.Duration("max-session", s.cfg.MaxSessionTimeout)
		s.cfg.ConsumerSessionTimeout = cmd.Duration("consumer-session", 0)
		s.cfg.MaxSize = int(cmd.Int("max-size", 0))
		s.cfg.ConsumerMaxSize = int(cmd.Int("consumer-max-size", 0))
		s.start()
		out := fmt.Sprintf("initial-delay=%s min-session=%s max-session=%s",
			s.cfg.InitialRebalanceDelay, s.cfg.MinSessionTimeout, s.cfg.MaxSessionTimeout)
		if d := s.cfg.ConsumerSessionTimeout; d > 0 {
			out += fmt.Sprintf(" consumer-session=%s", d)
		}
		if n := s.cfg.MaxSize; n > 0 {
			out += fmt.Sprintf(" max-size=%d", n)
		}
		if n := s.cfg.ConsumerMaxSize; n > 0 {
			out += fmt.Sprintf(" consumer-max-size=%d", n)
		}
		return out
	}
	if s.c == nil {
		s.start()
	}
	var out []string
	switch cmd.Name {
	case "join":
		s.join(cmd)
	case "sync":
		s.sync(cmd)
	case "heartbeat":
		r := kmsg.NewPtrHeartbeatRequest()
		r.Version = 4
		r.Group, r.MemberID, r.Generation = cmd.Arg(0), s.ids[cmd.Arg(1)], int32(cmd.Int("gen", -1))
		r.InstanceID = s.instance(cmd.Arg(1))
		resp := s.do(r).(*kmsg.HeartbeatResponse)
		out = append(out, fmt.Sprintf("%s: heartbeat: %s", cmd.Arg(1), transcript.ErrorName(resp.ErrorCode)))
	case "leave":
		out = append(out, s.leave(cmd)...)
	case "commit":
		out = append(out, s.commit(cmd)...)
	case "fetch":
		out = append(out, s.fetch(cmd)...)
	case "describe":
		out = append(out, s.describe(cmd.Arg(0)))
	case "topics":
		s.setTopics(cmd)
	case "hb":
		out = append(out, s.hb(cmd))
	case "txncommit":
		out = append(out, s.txnCommit(cmd)...)
	case "marker":
		s.marker(cmd)
	case "advance":
		s.clk.Advance(cmd.ParseDuration(cmd.Arg(0)))
		checkConsumerWritten(s.t, s.c)
	case "restart":
		if len(s.waiting) > 0 {
			cmd.Fatalf("restart with requests waiting")
		}
		s.c.Close()
		s.cfg.MaxSize = int(cmd.Int("max-size", int64(s.cfg.MaxSize)))
		s.start()
		out = append(out, "coordinator reloaded")
	default:
		cmd.Fatalf("unknown command")
	}
	return strings.Join(append(out, s.settle(cmd)...), "\n")
}

func (s *groupScript) do(req kmsg.Request) kmsg.Response {
	resp, err := s.c.Handle(WithClientInfo(context.Background(), "client", "/127.0.0.1"), req)
	if err != nil {
		s.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	checkConsumerWritten(s.t, s.c)
	return resp
}

// async sends req in its own goroutine; settle reports its answer.
func (s *groupScript) async(cmd transcript.Command, api string, req kmsg.Request) {
	alias, group := cmd.Arg(1), cmd.Arg(0)
	p := &pending{alias: alias, group: group, api: api, pos: cmd.Pos, ch: make(chan kmsg.Response, 1)}
	if in := s.instance(alias); in != nil {
		p.instance = *in
	}
	s.waiting = append(s.waiting, p)
	go func() { p.ch <- s.do(req) }()
}

func (s *groupScript) instance(alias string) *string {
	if in, ok := s.instances[alias]; ok {
		return &in
	}
	return nil
}

func (s *groupScript) join(cmd transcript.Command) {
	group, alias := cmd.Arg(0), cmd.Arg(1)
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group = group
	r.MemberID = s.ids[alias]
	if cmd.Str("id", "") == "none" {
		r.MemberID = ""
	}
	if in, ok := cmd.Opts["instance"]; ok {
		if s.instances == nil {
			s.instances = map[string]string{}
		}
		s.instances[alias] = in
	}
	r.InstanceID = s.instance(alias)
	r.SessionTimeoutMillis = int32(cmd.Duration("session", 10*time.Second).Milliseconds())
	r.RebalanceTimeoutMillis = int32(cmd.Duration("rebalance", 60*time.Second).Milliseconds())
	r.ProtocolType = "consumer"
	for _, name := range strings.Split(cmd.Str("protocols", "range"), ",") {
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = name, []byte(cmd.Str("meta", "t"))
		r.Protocols = append(r.Protocols, p)
	}
	s.async(cmd, "join", r)
}

func (s *groupScript) sync(cmd transcript.Command) {
	group, alias := cmd.Arg(0), cmd.Arg(1)
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = group, s.ids[alias], int32(cmd.Int("gen", -1))
	r.InstanceID = s.instance(alias)
	pt, pn := "consumer", "range"
	r.ProtocolType, r.Protocol = &pt, &pn
	if as := cmd.Str("assign", ""); as != "" {
		for _, kv := range strings.Split(as, ",") {
			m, v, ok := strings.Cut(kv, ":")
			if !ok {
				cmd.Fatalf("assign wants M:VALUE, got %q", kv)
			}
			a := kmsg.NewSyncGroupRequestGroupAssignment()
			a.MemberID, a.MemberAssignment = s.ids[m], []byte(v)
			r.GroupAssignment = append(r.GroupAssignment, a)
		}
	}
	s.async(cmd, "sync", r)
}

func (s *groupScript) leave(cmd transcript.Command) []string {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 4
	r.Group = cmd.Arg(0)
	for _, alias := range cmd.Args[1:] {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID, m.InstanceID = s.ids[alias], s.instance(alias)
		r.Members = append(r.Members, m)
	}
	resp := s.do(r).(*kmsg.LeaveGroupResponse)
	out := []string{"leave: " + transcript.ErrorName(resp.ErrorCode)}
	for i, m := range resp.Members {
		out = append(out, fmt.Sprintf("%s: left: %s", cmd.Args[1+i], transcript.ErrorName(m.ErrorCode)))
	}
	return out
}

func (s *groupScript) commit(cmd transcript.Command) []string {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.MemberID, r.Generation = cmd.Arg(0), s.ids[cmd.Arg(1)], int32(cmd.Int("gen", -1))
	r.InstanceID = s.instance(cmd.Arg(1))
	for _, k := range s.offsetOpts(cmd) {
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic = k.topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = k.partition, k.offset, -1
		t.Partitions = append(t.Partitions, rp)
		r.Topics = append(r.Topics, t)
	}
	resp := s.do(r).(*kmsg.OffsetCommitResponse)
	var out []string
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out = append(out, fmt.Sprintf("commit %s:%d: %s", t.Topic, p.Partition, transcript.ErrorName(p.ErrorCode)))
		}
	}
	return out
}

func (s *groupScript) fetch(cmd transcript.Command) []string {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = cmd.Arg(0)
	for _, a := range cmd.Args[1:] {
		if a == "stable" {
			r.RequireStable = true
			continue
		}
		k := s.parseTP(cmd, a)
		if n := len(rg.Topics); n == 0 || rg.Topics[n-1].Topic != k.topic {
			t := kmsg.NewOffsetFetchRequestGroupTopic()
			t.Topic = k.topic
			rg.Topics = append(rg.Topics, t)
		}
		rg.Topics[len(rg.Topics)-1].Partitions = append(rg.Topics[len(rg.Topics)-1].Partitions, k.partition)
	}
	r.Groups = append(r.Groups, rg)
	resp := s.do(r).(*kmsg.OffsetFetchResponse)
	var out []string
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			out = append(out, "fetch: "+transcript.ErrorName(g.ErrorCode))
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					out = append(out, fmt.Sprintf("%s:%d: %s", t.Topic, p.Partition, transcript.ErrorName(p.ErrorCode)))
					continue
				}
				out = append(out, fmt.Sprintf("%s:%d=%d", t.Topic, p.Partition, p.Offset))
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		out = append(out, "no offsets")
	}
	return out
}

func (s *groupScript) describe(id string) string {
	g := s.c.lookup(id)
	if g == nil {
		return id + ": no such group"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.consumer != nil {
		return s.describeConsumer(g)
	}
	var ms []string
	for mid, m := range g.members {
		d := s.alias(mid)
		if m.instanceID != nil {
			d += "(" + *m.instanceID + ")"
		}
		ms = append(ms, d)
	}
	sort.Strings(ms)
	out := fmt.Sprintf("%s: state=%s generation=%d", id, g.state, g.generation)
	if g.leader != "" {
		out += " leader=" + s.alias(g.leader)
	}
	if g.protocol != "" {
		out += " protocol=" + g.protocol
	}
	return out + " members=[" + strings.Join(ms, " ") + "]"
}

// alias names a member id (the id itself when no alias is bound).
func (s *groupScript) alias(id string) string {
	if a, ok := s.aliases[id]; ok {
		return a
	}
	return id
}

// settle waits until every request sent so far is answered or parked in
// the coordinator, then returns the answers (sorted by member) and
// "waiting" for the requests cmd sent that wait.
func (s *groupScript) settle(cmd transcript.Command) []string {
	deadline := time.Now().Add(10 * time.Second)
	type answer struct {
		p    *pending
		resp kmsg.Response
	}
	var answers []answer
	for {
		all := true
		var still []*pending
		for _, p := range s.waiting {
			select {
			case resp := <-p.ch:
				answers = append(answers, answer{p, resp})
				continue
			default:
			}
			still = append(still, p)
			if !s.parked(p) {
				all = false
			}
		}
		s.waiting = still
		if all {
			break
		}
		if time.Now().After(deadline) {
			cmd.Fatalf("requests neither answered nor waiting in the coordinator")
		}
		time.Sleep(time.Millisecond)
	}
	// Bind every member id handed out before printing member lists.
	for _, a := range answers {
		if r, ok := a.resp.(*kmsg.JoinGroupResponse); ok {
			s.bind(a.p.alias, r.MemberID)
		}
	}
	var done []string
	for _, a := range answers {
		done = append(done, s.format(a.p, a.resp))
	}
	sort.Strings(done)
	for _, p := range s.waiting {
		if p.pos == cmd.Pos {
			done = append(done, fmt.Sprintf("%s: %s: waiting", p.alias, p.api))
		}
	}
	return done
}

// parked reports whether p's member waits in the coordinator.
func (s *groupScript) parked(p *pending) bool {
	g := s.c.lookup(p.group)
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	id := s.ids[p.alias]
	if p.instance != "" {
		if sid, ok := g.static[p.instance]; ok {
			id = sid
		}
	}
	m := g.members[id]
	if m == nil {
		return false
	}
	if p.api == "join" {
		return m.joinCh != nil
	}
	// The leader's SyncGroup is answered once its assignment is stored
	// (finishSync after the write), never parked: until then it is on its
	// way, not waiting (treating it as parked printed "waiting" when the
	// write completed a moment after the check).
	return m.syncCh != nil && m.id != g.leader
}

// bind names member id with alias (the id a JoinGroup handed out).
func (s *groupScript) bind(alias, id string) {
	if id == "" || s.ids[alias] == id {
		return
	}
	if old, ok := s.ids[alias]; ok {
		delete(s.aliases, old)
	}
	s.ids[alias] = id
	s.aliases[id] = alias
}

// format prints an answer.
func (s *groupScript) format(p *pending, resp kmsg.Response) string {
	switch r := resp.(type) {
	case *kmsg.JoinGroupResponse:
		if r.ErrorCode != 0 {
			if r.ErrorCode == kerr.MemberIDRequired.Code {
				return fmt.Sprintf("%s: join: %s (member id assigned)", p.alias, transcript.ErrorName(r.ErrorCode))
			}
			return fmt.Sprintf("%s: join: %s", p.alias, transcript.ErrorName(r.ErrorCode))
		}
		out := fmt.Sprintf("%s: join: generation=%d leader=%s protocol=%s", p.alias, r.Generation, s.alias(r.LeaderID), derefOr(r.Protocol, "-"))
		if len(r.Members) > 0 {
			var ms []string
			for _, m := range r.Members {
				ms = append(ms, s.alias(m.MemberID))
			}
			sort.Strings(ms)
			out += " members=[" + strings.Join(ms, " ") + "]"
		}
		if r.SkipAssignment {
			out += " skip-assignment"
		}
		return out
	case *kmsg.SyncGroupResponse:
		if r.ErrorCode != 0 {
			return fmt.Sprintf("%s: sync: %s", p.alias, transcript.ErrorName(r.ErrorCode))
		}
		return fmt.Sprintf("%s: sync: assignment=%q", p.alias, r.MemberAssignment)
	}
	s.t.Fatalf("unexpected answer %T", resp)
	return ""
}

func derefOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}
