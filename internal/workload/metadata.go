package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/checker"
)

// MetaConfig configures a topic administration workload: one client per
// broker, each sending CreateTopics, DeleteTopics, CreatePartitions and
// IncrementalAlterConfigs straight to its own broker (not routed to a
// controller), on a few shared topic names, so that operations on one name
// from different brokers race.
type MetaConfig struct {
	// Brokers are the brokers' addresses and NodeIDs their node.id, in the
	// same order; client i talks to broker i only.
	Brokers []string
	NodeIDs []int32
	// Names are the topic names operated on (default 4: meta-0..meta-3).
	Names []string
	// ACLResources, when set, are literal topic resources whose ACLs the
	// clients also create (CreateAcls) and delete (DeleteAcls): bindings
	// of a few principals (READ, ALLOW, host *), so that the ACL
	// administration is checked too. The brokers need an authorizer that
	// lets the clients alter and describe the cluster's ACLs (e.g.
	// super.users=User:ANONYMOUS); the bindings name resources no one
	// uses, so they change no one's access.
	ACLResources []string
	// Pause is the pause between one client's operations (default 100 ms).
	Pause time.Duration
	// Timeout bounds each request (default 10 s); a request that times out
	// is indeterminate.
	Timeout time.Duration
	Seed    uint64
	Logf    func(string, ...any)
}

// metaConfigKey is the topic config the alters write (a unique value each).
const metaConfigKey = "retention.ms"

// MetaRunner runs the topic administration workload.
type MetaRunner struct {
	cfg    MetaConfig
	origin time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	cls    []*kgo.Client

	mu  sync.Mutex
	ops []checker.MetaOp
}

// StartMeta starts one client per broker; Stop ends them.
func StartMeta(ctx context.Context, cfg MetaConfig) (*MetaRunner, error) {
	if len(cfg.Brokers) == 0 || len(cfg.Brokers) != len(cfg.NodeIDs) {
		return nil, fmt.Errorf("metadata workload: %d brokers, %d node ids", len(cfg.Brokers), len(cfg.NodeIDs))
	}
	if len(cfg.Names) == 0 {
		cfg.Names = []string{"meta-0", "meta-1", "meta-2", "meta-3"}
	}
	if cfg.Pause <= 0 {
		cfg.Pause = 100 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	r := &MetaRunner{cfg: cfg, origin: time.Now()}
	for _, addr := range cfg.Brokers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(cfg.Timeout))
		if err != nil {
			r.Close()
			return nil, err
		}
		r.cls = append(r.cls, cl)
	}
	ctx, r.cancel = context.WithCancel(ctx)
	for i := range cfg.Brokers {
		r.wg.Add(1)
		go r.client(ctx, i) // owner: r, stopped by Stop
	}
	return r, nil
}

// Close closes the clients (after Stop and FinalRead).
func (r *MetaRunner) Close() {
	for _, cl := range r.cls {
		cl.Close()
	}
}

func (r *MetaRunner) now() int64 { return time.Since(r.origin).Nanoseconds() }

func (r *MetaRunner) record(op checker.MetaOp) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// client runs one client's loop: a random operation on a random name, then
// a pause.
func (r *MetaRunner) client(ctx context.Context, i int) {
	defer r.wg.Done()
	rng := rand.New(rand.NewPCG(r.cfg.Seed, uint64(i)))
	n := 0
	for ctx.Err() == nil {
		name := r.cfg.Names[rng.IntN(len(r.cfg.Names))]
		n++
		op := checker.MetaOp{Client: i, Broker: r.cfg.NodeIDs[i], Topic: name}
		if len(r.cfg.ACLResources) > 0 && rng.IntN(10) < 4 {
			op.Topic = r.cfg.ACLResources[rng.IntN(len(r.cfg.ACLResources))]
			switch k := rng.IntN(10); {
			case k < 5:
				op.Kind, op.Principal = checker.MetaCreateACL, aclPrincipals[rng.IntN(len(aclPrincipals))]
			case k < 8:
				op.Kind, op.Principal = checker.MetaDeleteACL, aclPrincipals[rng.IntN(len(aclPrincipals))]
			default:
				op.Kind = checker.MetaDeleteACL // any principal's
			}
			r.doACL(ctx, i, &op)
			r.record(op)
			select {
			case <-ctx.Done():
			case <-time.After(r.cfg.Pause):
			}
			continue
		}
		switch k := rng.IntN(10); {
		case k < 3:
			op.Kind, op.Partitions, op.Value = checker.MetaCreate, 1, metaValue(i, n)
		case k < 5:
			op.Kind = checker.MetaDelete
		case k < 8:
			op.Kind, op.Value = checker.MetaAlter, metaValue(i, n)
		default:
			op.Kind, op.Partitions = checker.MetaCreatePartitions, int32(2+rng.IntN(6))
		}
		r.do(ctx, i, &op)
		r.record(op) // one cut short by Stop is indeterminate

		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.Pause):
		}
	}
}

// metaValue is a unique value of the config for client i's n-th operation.
func metaValue(i, n int) string { return strconv.Itoa(86_400_000 + i*1_000_000 + n) }

// do sends op to client i's broker and records the answer.
func (r *MetaRunner) do(ctx context.Context, i int, op *checker.MetaOp) {
	rctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	b := r.cls[i].Broker(int(r.cfg.NodeIDs[i]))
	var code int16
	var msg string
	op.Start = r.now()
	err := func() error {
		switch op.Kind {
		case checker.MetaCreate:
			req := kmsg.NewPtrCreateTopicsRequest()
			req.TimeoutMillis = int32(r.cfg.Timeout / time.Millisecond)
			t := kmsg.NewCreateTopicsRequestTopic()
			t.Topic, t.NumPartitions, t.ReplicationFactor = op.Topic, op.Partitions, 1
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = metaConfigKey, kmsg.StringPtr(op.Value)
			t.Configs = append(t.Configs, c)
			req.Topics = append(req.Topics, t)
			resp, err := req.RequestWith(rctx, b)
			if err != nil {
				return err
			}
			if len(resp.Topics) != 1 {
				return fmt.Errorf("%d topics in the answer", len(resp.Topics))
			}
			code, msg = resp.Topics[0].ErrorCode, strPtr(resp.Topics[0].ErrorMessage)
		case checker.MetaDelete:
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.TimeoutMillis = int32(r.cfg.Timeout / time.Millisecond)
			req.TopicNames = []string{op.Topic}
			t := kmsg.NewDeleteTopicsRequestTopic()
			t.Topic = kmsg.StringPtr(op.Topic)
			req.Topics = append(req.Topics, t)
			resp, err := req.RequestWith(rctx, b)
			if err != nil {
				return err
			}
			if len(resp.Topics) != 1 {
				return fmt.Errorf("%d topics in the answer", len(resp.Topics))
			}
			code, msg = resp.Topics[0].ErrorCode, strPtr(resp.Topics[0].ErrorMessage)
		case checker.MetaAlter:
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, op.Topic
			c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			c.Name, c.Op, c.Value = metaConfigKey, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(op.Value)
			res.Configs = append(res.Configs, c)
			req.Resources = append(req.Resources, res)
			resp, err := req.RequestWith(rctx, b)
			if err != nil {
				return err
			}
			if len(resp.Resources) != 1 {
				return fmt.Errorf("%d resources in the answer", len(resp.Resources))
			}
			code, msg = resp.Resources[0].ErrorCode, strPtr(resp.Resources[0].ErrorMessage)
		case checker.MetaCreatePartitions:
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.TimeoutMillis = int32(r.cfg.Timeout / time.Millisecond)
			t := kmsg.NewCreatePartitionsRequestTopic()
			t.Topic, t.Count = op.Topic, op.Partitions
			req.Topics = append(req.Topics, t)
			resp, err := req.RequestWith(rctx, b)
			if err != nil {
				return err
			}
			if len(resp.Topics) != 1 {
				return fmt.Errorf("%d topics in the answer", len(resp.Topics))
			}
			code, msg = resp.Topics[0].ErrorCode, strPtr(resp.Topics[0].ErrorMessage)
		}
		return nil
	}()
	op.End = r.now()
	switch {
	case err != nil:
		op.Outcome, op.Error = checker.MetaIndeterminate, err.Error()
	default:
		op.Outcome = MetaOutcomeOf(code)
		if code != 0 {
			op.Error = kerr.ErrorForCode(code).Error()
			if msg != "" {
				op.Error += ": " + msg
			}
		}
	}
}

// aclPrincipals are the principals of the workload's ACL bindings.
var aclPrincipals = []string{"User:meta-a", "User:meta-b", "User:meta-c"}

// aclFilter is the DeleteAcls / DescribeAcls filter of the workload's
// bindings on resource (principal "" matches any principal).
func aclFilter(resource, principal string) kmsg.DeleteACLsRequestFilter {
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName = kmsg.ACLResourceTypeTopic, kmsg.StringPtr(resource)
	f.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	if principal != "" {
		f.Principal = kmsg.StringPtr(principal)
	}
	f.Host = kmsg.StringPtr("*")
	f.Operation, f.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	return f
}

// doACL sends an ACL operation to client i's broker and records the
// answer (a deletion's listed matches in op.Matched).
func (r *MetaRunner) doACL(ctx context.Context, i int, op *checker.MetaOp) {
	rctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	b := r.cls[i].Broker(int(r.cfg.NodeIDs[i]))
	var code int16
	var msg string
	op.Start = r.now()
	err := func() error {
		switch op.Kind {
		case checker.MetaCreateACL:
			req := kmsg.NewPtrCreateACLsRequest()
			c := kmsg.NewCreateACLsRequestCreation()
			c.ResourceType, c.ResourceName = kmsg.ACLResourceTypeTopic, op.Topic
			c.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
			c.Principal, c.Host = op.Principal, "*"
			c.Operation, c.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
			req.Creations = append(req.Creations, c)
			resp, err := req.RequestWith(rctx, b)
			if err != nil {
				return err
			}
			if len(resp.Results) != 1 {
				return fmt.Errorf("%d results in the answer", len(resp.Results))
			}
			code, msg = resp.Results[0].ErrorCode, strPtr(resp.Results[0].ErrorMessage)
		case checker.MetaDeleteACL:
			req := kmsg.NewPtrDeleteACLsRequest()
			req.Filters = append(req.Filters, aclFilter(op.Topic, op.Principal))
			resp, err := req.RequestWith(rctx, b)
			if err != nil {
				return err
			}
			if len(resp.Results) != 1 {
				return fmt.Errorf("%d results in the answer", len(resp.Results))
			}
			res := resp.Results[0]
			code, msg = res.ErrorCode, strPtr(res.ErrorMessage)
			for _, m := range res.MatchingACLs {
				if m.ErrorCode != 0 {
					code, msg = m.ErrorCode, strPtr(m.ErrorMessage)
				}
				op.Matched = append(op.Matched, m.Principal)
			}
		}
		return nil
	}()
	op.End = r.now()
	switch {
	case err != nil:
		op.Outcome, op.Error = checker.MetaIndeterminate, err.Error()
	default:
		op.Outcome = MetaOutcomeOf(code)
		if code != 0 {
			op.Error = kerr.ErrorForCode(code).Error()
			if msg != "" {
				op.Error += ": " + msg
			}
		}
	}
}

// readACLs is broker i's cached view of resource's bindings: the
// principals, sorted.
func (r *MetaRunner) readACLs(ctx context.Context, i int, resource string) ([]string, error) {
	rctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	b := r.cls[i].Broker(int(r.cfg.NodeIDs[i]))
	f := aclFilter(resource, "")
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourceName, req.ResourcePatternType = f.ResourceType, f.ResourceName, f.ResourcePatternType
	req.Principal, req.Host, req.Operation, req.PermissionType = f.Principal, f.Host, f.Operation, f.PermissionType
	resp, err := req.RequestWith(rctx, b)
	if err != nil {
		return nil, err
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("describe acls of %s: %w", resource, kerr.ErrorForCode(resp.ErrorCode))
	}
	var out []string
	for _, res := range resp.Resources {
		for _, a := range res.ACLs {
			out = append(out, a.Principal)
		}
	}
	slices.Sort(out)
	return out, nil
}

func strPtr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// MetaOutcomeOf classifies a Kafka error code of a topic administration
// answer: the refusals that reveal the state, the definite refusals
// decided without effect, and everything else (timeouts, NOT_CONTROLLER,
// unknown server errors), which may or may not have taken effect.
func MetaOutcomeOf(code int16) checker.MetaOutcome {
	switch err := kerr.ErrorForCode(code); {
	case code == 0:
		return checker.MetaOK
	case errors.Is(err, kerr.TopicAlreadyExists):
		return checker.MetaExists
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return checker.MetaUnknownTopic
	case errors.Is(err, kerr.InvalidPartitions):
		return checker.MetaInvalidPartitions
	case errors.Is(err, kerr.InvalidReplicationFactor), errors.Is(err, kerr.InvalidConfig), errors.Is(err, kerr.InvalidRequest),
		errors.Is(err, kerr.PolicyViolation), errors.Is(err, kerr.TopicDeletionDisabled), errors.Is(err, kerr.InvalidTopicException),
		errors.Is(err, kerr.InvalidReplicaAssignment), errors.Is(err, kerr.SecurityDisabled), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return checker.MetaRefused
	}
	return checker.MetaIndeterminate
}

// Stop ends the clients (an operation cut short is recorded
// indeterminate).
func (r *MetaRunner) Stop() {
	r.cancel()
	r.wg.Wait()
}

// FinalRead waits, once the cluster healed, until every broker gives the
// same answer for every name (Metadata: exists and partition count;
// DescribeConfigs: the config) twice in a row, then records one read per
// name: a read made after every operation ended, when every broker
// converged, is a linearizable read at the end of the history. It fails
// if the brokers do not converge before ctx ends.
func (r *MetaRunner) FinalRead(ctx context.Context) error {
	var last map[string]metaView
	var lastACLs map[string][]string
	for {
		cur := map[string]metaView{}
		curACLs := map[string][]string{}
		agree := true
		for i := range r.cls {
			for _, name := range r.cfg.Names {
				v, err := r.readOne(ctx, i, name)
				if err != nil {
					agree = false
					break
				}
				if prev, ok := cur[name]; ok && prev != v {
					agree = false
				}
				cur[name] = v
			}
			for _, res := range r.cfg.ACLResources {
				ps, err := r.readACLs(ctx, i, res)
				if err != nil {
					agree = false
					break
				}
				if prev, ok := curACLs[res]; ok && !slices.Equal(prev, ps) {
					agree = false
				}
				curACLs[res] = ps
			}
		}
		if agree && last != nil && fmt.Sprint(last) == fmt.Sprint(cur) && fmt.Sprint(lastACLs) == fmt.Sprint(curACLs) {
			now := r.now()
			for _, name := range r.cfg.Names {
				v := cur[name]
				r.record(checker.MetaOp{Client: -1, Kind: checker.MetaRead, Topic: name, Exists: v.exists, Partitions: v.parts,
					Value: v.value, Outcome: checker.MetaOK, Start: now, End: now})
			}
			for _, res := range r.cfg.ACLResources {
				r.record(checker.MetaOp{Client: -1, Kind: checker.MetaReadACL, Topic: res, Matched: curACLs[res],
					Outcome: checker.MetaOK, Start: now, End: now})
			}
			return nil
		}
		if agree {
			last, lastACLs = cur, curACLs
		} else {
			last, lastACLs = nil, nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the brokers did not converge on the topics' and ACLs' state: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// metaView is one broker's answer about one name.
type metaView struct {
	exists bool
	parts  int32
	value  string
}

// readOne is broker i's cached view of name.
func (r *MetaRunner) readOne(ctx context.Context, i int, name string) (v metaView, err error) {
	rctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	b := r.cls[i].Broker(int(r.cfg.NodeIDs[i]))
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.AllowAutoTopicCreation = false
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(name)
	mreq.Topics = append(mreq.Topics, t)
	mresp, err := mreq.RequestWith(rctx, b)
	if err != nil {
		return v, err
	}
	if len(mresp.Topics) != 1 {
		return v, fmt.Errorf("metadata: %d topics", len(mresp.Topics))
	}
	switch mt := mresp.Topics[0]; mt.ErrorCode {
	case kerr.UnknownTopicOrPartition.Code:
		return v, nil
	case 0:
		v.exists, v.parts = true, int32(len(mt.Partitions))
	default:
		return v, kerr.ErrorForCode(mt.ErrorCode)
	}
	dreq := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, name, []string{metaConfigKey}
	dreq.Resources = append(dreq.Resources, res)
	dresp, err := dreq.RequestWith(rctx, b)
	if err != nil {
		return v, err
	}
	if len(dresp.Resources) != 1 || dresp.Resources[0].ErrorCode != 0 {
		return v, fmt.Errorf("describe configs of %s: %+v", name, dresp.Resources)
	}
	for _, c := range dresp.Resources[0].Configs {
		if c.Name == metaConfigKey && c.Value != nil {
			v.value = *c.Value
		}
	}
	return v, nil
}

// Ops returns the history so far.
func (r *MetaRunner) Ops() []checker.MetaOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]checker.MetaOp(nil), r.ops...)
}

// WriteMetaArtifacts saves the metadata history (meta-history.jsonl) and
// the verdict (meta-report.txt) in dir.
func WriteMetaArtifacts(dir string, ops []checker.MetaOp, res *checker.MetaResult) error {
	f, err := os.Create(filepath.Join(dir, "meta-history.jsonl"))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	var b []byte
	b = append(b, res.String()...)
	for i, op := range ops {
		b = append(b, fmt.Sprintf("%d %s\n", i, op)...)
	}
	return os.WriteFile(filepath.Join(dir, "meta-report.txt"), b, 0o644)
}
