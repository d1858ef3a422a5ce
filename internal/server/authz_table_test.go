package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/authz"
	"github.com/strata-io/strata/internal/record"
	"github.com/strata-io/strata/internal/record/recordtest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The rows of Kafka's "Operations and Resources on Protocols" table
// (docs/security.html), each checked as User:bob over the wire: with every
// other ACL the request needs but not the row's, the request fails with
// the row's Kafka code; with the row's ACL too, it no longer fails
// authorization. Where Kafka's code differs from its table, the code is
// followed and the row says so.

type tableACL struct {
	rt   authz.ResourceType
	name string
	op   authz.Operation
}

func onTopic(op authz.Operation) tableACL { return tableACL{authz.ResourceTopic, "t1", op} }
func onGroup(op authz.Operation) tableACL { return tableACL{authz.ResourceGroup, "g1", op} }
func onTxn(op authz.Operation) tableACL   { return tableACL{authz.ResourceTransactionalID, "tx1", op} }
func onCluster(op authz.Operation) tableACL {
	return tableACL{authz.ResourceCluster, authz.ClusterName, op}
}

// setACLs replaces User:bob's ACLs (as the super user admin).
func setACLs(t *testing.T, ctx context.Context, admin *kgo.Client, acls []tableACL) {
	t.Helper()
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	f.Principal = kmsg.StringPtr("User:bob")
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	if resp, err := del.RequestWith(ctx, admin); err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("delete bob's ACLs: %v %+v", err, resp)
	}
	if len(acls) == 0 {
		return
	}
	cr := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(a.rt), a.name, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host = "User:bob", "*"
		c.Operation, c.PermissionType = kmsg.ACLOperation(a.op), kmsg.ACLPermissionTypeAllow
		cr.Creations = append(cr.Creations, c)
	}
	resp, err := cr.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("create ACL: %v", kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

func authzCode(c int16) bool {
	return c == kerr.TopicAuthorizationFailed.Code || c == kerr.GroupAuthorizationFailed.Code ||
		c == kerr.ClusterAuthorizationFailed.Code || c == kerr.TransactionalIDAuthorizationFailed.Code
}

// testBatch is one record batch, transactional (producer id 1) or not.
func testBatch(transactional bool) []byte {
	h := recordtest.NoProducer
	h.BaseTimestamp = time.Now().UnixMilli()
	if transactional {
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = 1, 0, 0
		h.Attributes |= record.AttrTransactional
	}
	return recordtest.Batch(h, record.Record{Value: []byte("v")})
}

type tableRow struct {
	row    string       // the table's row: API (key) Operation Resource
	others []tableACL   // what the request needs besides the row's ACL
	grant  tableACL     // the row's ACL
	denied int16        // Kafka's code without it
	send   func() int16 // sends the request, returns the code the row concerns
}

func TestOperationsTable(t *testing.T) {
	tb := startSecure(t, nil)
	ctx := ctxT(t)
	admin := as(tb, "admin")
	adm := adminAs(tb, "admin")
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t1"); err != nil {
		t.Fatal(err)
	}
	if err := as(tb, "admin", kgo.DefaultProduceTopic("t1")).ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tds, err := adm.ListTopics(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	t1ID := tds["t1"].ID
	bobCl := as(tb, "bob")
	if err := bobCl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	bob := bobCl.Broker(1) // requests straight to the node: no coordinator lookup in between
	send := func(req kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := bob.Request(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
		}
		return resp
	}
	produce := func(txnID *string) int16 {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, txnID
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t1"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = testBatch(txnID != nil)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	fetch := func(replica int32) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = replica, 1<<20, -1
		req.ReplicaState.ID = replica // v15+ (KIP-903)
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "t1", t1ID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		return send(req).(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
	}
	metadata := func(topic string) int16 {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		req.AllowAutoTopicCreation = true
		return send(req).(*kmsg.MetadataResponse).Topics[0].ErrorCode
	}
	offsetCommit := func() int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "g1", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t1"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send(req).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	offsetFetch := func(topicCode bool) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		g := kmsg.NewOffsetFetchRequestGroup()
		g.Group = "g1"
		gt := kmsg.NewOffsetFetchRequestGroupTopic()
		gt.Topic, gt.Partitions = "t1", []int32{0}
		g.Topics = append(g.Topics, gt)
		req.Groups = append(req.Groups, g)
		rg := send(req).(*kmsg.OffsetFetchResponse).Groups[0]
		if topicCode && rg.ErrorCode == 0 {
			return rg.Topics[0].Partitions[0].ErrorCode
		}
		return rg.ErrorCode
	}
	findCoordinator := func(typ int8, key string) int16 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = typ, []string{key}
		return send(req).(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode
	}
	groupRead := func(req kmsg.Request) func() int16 {
		return func() int16 {
			switch r := send(req).(type) {
			case *kmsg.JoinGroupResponse:
				return r.ErrorCode
			case *kmsg.HeartbeatResponse:
				return r.ErrorCode
			case *kmsg.LeaveGroupResponse:
				return r.ErrorCode
			case *kmsg.SyncGroupResponse:
				return r.ErrorCode
			case *kmsg.ConsumerGroupHeartbeatResponse:
				return r.ErrorCode
			}
			return -999
		}
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "g1", 6000, 1000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID = "g1", "nobody"
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "g1"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "nobody"}}
	syncg := kmsg.NewPtrSyncGroupRequest()
	syncg.Group, syncg.MemberID = "g1", "nobody"
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.Group, cgh.MemberEpoch, cgh.RebalanceTimeoutMillis, cgh.SubscribedTopicNames = "g1", 0, 1000, []string{"t1"}

	describeGroups := func() int16 {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{"g1"}
		return send(req).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode
	}
	listGroupsSees := func() int16 { // LIST_GROUPS never fails: a refused group is left out
		req := kmsg.NewPtrListGroupsRequest()
		for _, g := range send(req).(*kmsg.ListGroupsResponse).Groups {
			if g.Group == "g1" {
				return 0
			}
		}
		return kerr.GroupAuthorizationFailed.Code
	}
	createTopic := func() int16 {
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t1", 1, 1 // exists: TOPIC_ALREADY_EXISTS once authorized
		req.Topics = append(req.Topics, rt)
		return send(req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
	}
	deleteTopic := func() int16 {
		req := kmsg.NewPtrDeleteTopicsRequest()
		req.TopicNames = []string{"gone"}
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr("gone")
		req.Topics = append(req.Topics, dt)
		return send(req).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode
	}
	deleteRecords := func() int16 {
		req := kmsg.NewPtrDeleteRecordsRequest()
		rt := kmsg.NewDeleteRecordsRequestTopic()
		rt.Topic = "t1"
		rp := kmsg.NewDeleteRecordsRequestTopicPartition()
		rp.Offset = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send(req).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode
	}
	initPID := func(txnID *string) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionalID, req.TransactionTimeoutMillis = txnID, 60000
			return send(req).(*kmsg.InitProducerIDResponse).ErrorCode
		}
	}
	offsetForLeaderEpoch := func() int16 {
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = "t1"
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.LeaderEpoch = -1, 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return send(req).(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0].ErrorCode
	}
	// A client's AddPartitionsToTxn is v3 at most: v4+ (advertised in a
	// cluster, as Kafka 3.6+) is the broker-to-broker form (KIP-890).
	bob3 := as(tb, "bob", kgo.MaxVersions(func() *kversion.Versions { v := kversion.Stable(); v.SetMaxKeyVersion(24, 3); return v }())).Broker(1)
	addPartitions := func() int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 3
		req.TransactionalID, req.ProducerID, req.ProducerEpoch = "tx1", 1, 0
		req.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "t1", Partitions: []int32{0}}}
		resp, err := bob3.Request(ctx, req)
		if err != nil {
			t.Fatalf("AddPartitionsToTxn: %v", err)
		}
		return resp.(*kmsg.AddPartitionsToTxnResponse).Topics[0].Partitions[0].ErrorCode
	}
	// The broker-to-broker requests of a cluster (KIP-890 verification and
	// markers from another broker's transaction coordinator).
	verifyPartitions := func() int16 {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = "tx1", 1, 0, true
		tx.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "t1", Partitions: []int32{0}}}
		req.Transactions = append(req.Transactions, tx)
		resp := send(req).(*kmsg.AddPartitionsToTxnResponse)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Transactions[0].Topics[0].Partitions[0].ErrorCode
	}
	writeMarkers := func() int16 {
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.ProducerEpoch, m.Committed = 1, 0, false
		m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "t1", Partitions: []int32{0}}}
		req.Markers = append(req.Markers, m)
		return send(req).(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	addOffsets := func() int16 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.Group = "tx1", 1, "g1"
		return send(req).(*kmsg.AddOffsetsToTxnResponse).ErrorCode
	}
	endTxn := func() int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID = "tx1", 1
		return send(req).(*kmsg.EndTxnResponse).ErrorCode
	}
	txnOffsetCommit := func() int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.Generation = "tx1", "g1", 1, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "t1"
		rt.Partitions = []kmsg.TxnOffsetCommitRequestTopicPartition{kmsg.NewTxnOffsetCommitRequestTopicPartition()}
		req.Topics = append(req.Topics, rt)
		return send(req).(*kmsg.TxnOffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	describeACLs := func() int16 {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return send(req).(*kmsg.DescribeACLsResponse).ErrorCode
	}
	createACLs := func() int16 {
		req := kmsg.NewPtrCreateACLsRequest()
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "other", kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = "User:carol", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
		return send(req).(*kmsg.CreateACLsResponse).Results[0].ErrorCode
	}
	deleteACLs := func() int16 {
		req := kmsg.NewPtrDeleteACLsRequest()
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeLiteral
		f.ResourceName, f.Principal = kmsg.StringPtr("other"), kmsg.StringPtr("User:carol")
		f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		req.Filters = append(req.Filters, f)
		return send(req).(*kmsg.DeleteACLsResponse).Results[0].ErrorCode
	}
	describeConfigs := func(rt kmsg.ConfigResourceType, name string) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrDescribeConfigsRequest()
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = rt, name
			req.Resources = append(req.Resources, r)
			return send(req).(*kmsg.DescribeConfigsResponse).Resources[0].ErrorCode
		}
	}
	alterConfigs := func(rt kmsg.ConfigResourceType, name, key, value string) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrAlterConfigsRequest()
			req.ValidateOnly = true
			r := kmsg.NewAlterConfigsRequestResource()
			r.ResourceType, r.ResourceName = rt, name
			r.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: key, Value: kmsg.StringPtr(value)}}
			req.Resources = append(req.Resources, r)
			return send(req).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode
		}
	}
	incAlterConfigs := func(rt kmsg.ConfigResourceType, name, key, value string) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			req.ValidateOnly = true
			r := kmsg.NewIncrementalAlterConfigsRequestResource()
			r.ResourceType, r.ResourceName = rt, name
			r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: key, Value: kmsg.StringPtr(value)}}
			req.Resources = append(req.Resources, r)
			return send(req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
		}
	}
	describeLogDirs := func() int16 {
		return send(kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse).ErrorCode
	}
	createPartitions := func() int16 {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.ValidateOnly = true
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "t1", 2
		req.Topics = append(req.Topics, rt)
		return send(req).(*kmsg.CreatePartitionsResponse).Topics[0].ErrorCode
	}
	deleteGroups := func() int16 {
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Groups = []string{"g1"}
		return send(req).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode
	}
	electLeaders := func() int16 {
		req := kmsg.NewPtrElectLeadersRequest()
		req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t1", Partitions: []int32{0}}}
		return send(req).(*kmsg.ElectLeadersResponse).ErrorCode
	}
	alterReassignments := func() int16 {
		req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		return send(req).(*kmsg.AlterPartitionAssignmentsResponse).ErrorCode
	}
	listReassignments := func() int16 {
		return send(kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse).ErrorCode
	}
	offsetDelete := func(topicCode bool) func() int16 {
		return func() int16 {
			req := kmsg.NewPtrOffsetDeleteRequest()
			req.Group = "g1"
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = "t1"
			rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
			req.Topics = append(req.Topics, rt)
			resp := send(req).(*kmsg.OffsetDeleteResponse)
			if topicCode && resp.ErrorCode == 0 && len(resp.Topics) > 0 {
				return resp.Topics[0].Partitions[0].ErrorCode
			}
			return resp.ErrorCode
		}
	}
	describeQuotas := func() int16 {
		return send(kmsg.NewPtrDescribeClientQuotasRequest()).(*kmsg.DescribeClientQuotasResponse).ErrorCode
	}
	alterQuotas := func() int16 {
		req := kmsg.NewPtrAlterClientQuotasRequest()
		req.ValidateOnly = true
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("carol")}}
		e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1024}}
		req.Entries = append(req.Entries, e)
		return send(req).(*kmsg.AlterClientQuotasResponse).Entries[0].ErrorCode
	}
	describeScram := func() int16 {
		return send(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()).(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode
	}
	alterScram := func() int16 {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "carol", Mechanism: 1}}
		return send(req).(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode
	}
	describeClusterOps := func() int16 {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.IncludeClusterAuthorizedOperations = true
		if send(req).(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations == 0 {
			return kerr.ClusterAuthorizationFailed.Code
		}
		return 0
	}
	describeProducers := func() int16 {
		req := kmsg.NewPtrDescribeProducersRequest()
		req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "t1", Partitions: []int32{0}}}
		return send(req).(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ErrorCode
	}
	describeTxns := func() int16 {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = []string{"tx1"}
		return send(req).(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode
	}
	consumerGroupDescribe := func() int16 {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"g1"}
		return send(req).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode
	}

	var (
		topicD   = kerr.TopicAuthorizationFailed.Code
		groupD   = kerr.GroupAuthorizationFailed.Code
		clusterD = kerr.ClusterAuthorizationFailed.Code
		txnD     = kerr.TransactionalIDAuthorizationFailed.Code
	)
	rows := []tableRow{
		{"PRODUCE (0) Write TransactionalId", []tableACL{onTopic(authz.OpWrite)}, onTxn(authz.OpWrite), txnD, func() int16 { return produce(kmsg.StringPtr("tx1")) }},
		{"PRODUCE (0) Write Topic", nil, onTopic(authz.OpWrite), topicD, func() int16 { return produce(nil) }},
		{"FETCH (1) ClusterAction Cluster (a follower's fetch)", nil, onCluster(authz.OpClusterAction), topicD, func() int16 { return fetch(2) }},
		{"FETCH (1) Read Topic", nil, onTopic(authz.OpRead), topicD, func() int16 { return fetch(-1) }},
		{"LIST_OFFSETS (2) Describe Topic", nil, onTopic(authz.OpDescribe), topicD, func() int16 {
			req := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "t1"
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Timestamp = -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return send(req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
		}},
		{"METADATA (3) Describe Topic", nil, onTopic(authz.OpDescribe), topicD, func() int16 { return metadata("t1") }},
		{"METADATA (3) Create Cluster (auto-creation)", []tableACL{{authz.ResourceTopic, "auto1", authz.OpDescribe}}, onCluster(authz.OpCreate), topicD, func() int16 { return metadata("auto1") }},
		{"METADATA (3) Create Topic (auto-creation)", []tableACL{{authz.ResourceTopic, "auto2", authz.OpDescribe}}, tableACL{authz.ResourceTopic, "auto2", authz.OpCreate}, topicD, func() int16 { return metadata("auto2") }},
		{"OFFSET_COMMIT (8) Read Group", []tableACL{onTopic(authz.OpRead)}, onGroup(authz.OpRead), groupD, offsetCommit},
		{"OFFSET_COMMIT (8) Read Topic", []tableACL{onGroup(authz.OpRead)}, onTopic(authz.OpRead), topicD, offsetCommit},
		{"OFFSET_FETCH (9) Describe Group", []tableACL{onTopic(authz.OpDescribe)}, onGroup(authz.OpDescribe), groupD, func() int16 { return offsetFetch(false) }},
		{"OFFSET_FETCH (9) Describe Topic", []tableACL{onGroup(authz.OpDescribe)}, onTopic(authz.OpDescribe), topicD, func() int16 { return offsetFetch(true) }},
		{"FIND_COORDINATOR (10) Describe Group", nil, onGroup(authz.OpDescribe), groupD, func() int16 { return findCoordinator(0, "g1") }},
		{"FIND_COORDINATOR (10) Describe TransactionalId", nil, onTxn(authz.OpDescribe), txnD, func() int16 { return findCoordinator(1, "tx1") }},
		{"JOIN_GROUP (11) Read Group", nil, onGroup(authz.OpRead), groupD, groupRead(join)},
		{"HEARTBEAT (12) Read Group", nil, onGroup(authz.OpRead), groupD, groupRead(hb)},
		{"LEAVE_GROUP (13) Read Group", nil, onGroup(authz.OpRead), groupD, groupRead(leave)},
		{"SYNC_GROUP (14) Read Group", nil, onGroup(authz.OpRead), groupD, groupRead(syncg)},
		{"DESCRIBE_GROUPS (15) Describe Group", nil, onGroup(authz.OpDescribe), groupD, describeGroups},
		{"LIST_GROUPS (16) Describe Cluster", nil, onCluster(authz.OpDescribe), groupD, listGroupsSees},
		{"LIST_GROUPS (16) Describe Group", nil, onGroup(authz.OpDescribe), groupD, listGroupsSees},
		{"CREATE_TOPICS (19) Create Cluster", nil, onCluster(authz.OpCreate), topicD, createTopic},
		{"CREATE_TOPICS (19) Create Topic", nil, onTopic(authz.OpCreate), topicD, createTopic},
		{"DELETE_TOPICS (20) Delete Topic", []tableACL{{authz.ResourceTopic, "gone", authz.OpDescribe}}, tableACL{authz.ResourceTopic, "gone", authz.OpDelete}, topicD, deleteTopic},
		{"DELETE_RECORDS (21) Delete Topic", nil, onTopic(authz.OpDelete), topicD, deleteRecords},
		{"INIT_PRODUCER_ID (22) Write TransactionalId", nil, onTxn(authz.OpWrite), txnD, initPID(kmsg.StringPtr("tx1"))},
		{"INIT_PRODUCER_ID (22) IdempotentWrite Cluster", nil, onCluster(authz.OpIdempotentWrite), clusterD, initPID(nil)},
		{"INIT_PRODUCER_ID (22) Write Topic (Kafka 3.x, KIP-679: instead of IdempotentWrite)", nil, onTopic(authz.OpWrite), clusterD, initPID(nil)},
		{"OFFSET_FOR_LEADER_EPOCH (23) ClusterAction Cluster", nil, onCluster(authz.OpClusterAction), topicD, offsetForLeaderEpoch},
		{"OFFSET_FOR_LEADER_EPOCH (23) Describe Topic", nil, onTopic(authz.OpDescribe), topicD, offsetForLeaderEpoch},
		{"ADD_PARTITIONS_TO_TXN (24) Write TransactionalId", []tableACL{onTopic(authz.OpWrite)}, onTxn(authz.OpWrite), txnD, addPartitions},
		{"ADD_PARTITIONS_TO_TXN (24) Write Topic", []tableACL{onTxn(authz.OpWrite)}, onTopic(authz.OpWrite), topicD, addPartitions},
		{"ADD_OFFSETS_TO_TXN (25) Write TransactionalId", []tableACL{onGroup(authz.OpRead)}, onTxn(authz.OpWrite), txnD, addOffsets},
		{"ADD_OFFSETS_TO_TXN (25) Read Group", []tableACL{onTxn(authz.OpWrite)}, onGroup(authz.OpRead), groupD, addOffsets},
		{"END_TXN (26) Write TransactionalId", nil, onTxn(authz.OpWrite), txnD, endTxn},
		{"ADD_PARTITIONS_TO_TXN (24, v4: a partition leader's verification) ClusterAction Cluster", nil, onCluster(authz.OpClusterAction), clusterD, verifyPartitions},
		{"WRITE_TXN_MARKERS (27) ClusterAction Cluster", nil, onCluster(authz.OpClusterAction), clusterD, writeMarkers},
		{"TXN_OFFSET_COMMIT (28) Write TransactionalId", []tableACL{onGroup(authz.OpRead), onTopic(authz.OpRead)}, onTxn(authz.OpWrite), txnD, txnOffsetCommit},
		{"TXN_OFFSET_COMMIT (28) Read Group", []tableACL{onTxn(authz.OpWrite), onTopic(authz.OpRead)}, onGroup(authz.OpRead), groupD, txnOffsetCommit},
		{"TXN_OFFSET_COMMIT (28) Read Topic", []tableACL{onTxn(authz.OpWrite), onGroup(authz.OpRead)}, onTopic(authz.OpRead), topicD, txnOffsetCommit},
		{"DESCRIBE_ACLS (29) Describe Cluster", nil, onCluster(authz.OpDescribe), clusterD, describeACLs},
		{"CREATE_ACLS (30) Alter Cluster", nil, onCluster(authz.OpAlter), clusterD, createACLs},
		{"DELETE_ACLS (31) Alter Cluster", nil, onCluster(authz.OpAlter), clusterD, deleteACLs},
		{"DESCRIBE_CONFIGS (32) DescribeConfigs Cluster", nil, onCluster(authz.OpDescribeConfigs), clusterD, describeConfigs(kmsg.ConfigResourceTypeBroker, "1")},
		{"DESCRIBE_CONFIGS (32) DescribeConfigs Topic", nil, onTopic(authz.OpDescribeConfigs), topicD, describeConfigs(kmsg.ConfigResourceTypeTopic, "t1")},
		{"ALTER_CONFIGS (33) AlterConfigs Cluster", nil, onCluster(authz.OpAlterConfigs), clusterD, alterConfigs(kmsg.ConfigResourceTypeBroker, "1", "log.cleaner.threads", "1")},
		{"ALTER_CONFIGS (33) AlterConfigs Topic", nil, onTopic(authz.OpAlterConfigs), topicD, alterConfigs(kmsg.ConfigResourceTypeTopic, "t1", "retention.ms", "1000")},
		{"DESCRIBE_LOG_DIRS (35) Describe Cluster", nil, onCluster(authz.OpDescribe), clusterD, describeLogDirs},
		{"CREATE_PARTITIONS (37) Alter Topic", nil, onTopic(authz.OpAlter), topicD, createPartitions},
		{"ELECT_PREFERRED_LEADERS (43) Alter Cluster (Kafka's code; its table says ClusterAction)", nil, onCluster(authz.OpAlter), clusterD, electLeaders},
		{"INCREMENTAL_ALTER_CONFIGS (44) AlterConfigs Cluster", nil, onCluster(authz.OpAlterConfigs), clusterD, incAlterConfigs(kmsg.ConfigResourceTypeBroker, "1", "log.cleaner.threads", "1")},
		{"INCREMENTAL_ALTER_CONFIGS (44) AlterConfigs Topic", nil, onTopic(authz.OpAlterConfigs), topicD, incAlterConfigs(kmsg.ConfigResourceTypeTopic, "t1", "retention.ms", "1000")},
		{"ALTER_PARTITION_REASSIGNMENTS (45) Alter Cluster", nil, onCluster(authz.OpAlter), clusterD, alterReassignments},
		{"LIST_PARTITION_REASSIGNMENTS (46) Describe Cluster", nil, onCluster(authz.OpDescribe), clusterD, listReassignments},
		{"OFFSET_DELETE (47) Delete Group", []tableACL{onTopic(authz.OpRead)}, onGroup(authz.OpDelete), groupD, offsetDelete(false)},
		{"OFFSET_DELETE (47) Read Topic", []tableACL{onGroup(authz.OpDelete)}, onTopic(authz.OpRead), topicD, offsetDelete(true)},
		{"DESCRIBE_CLIENT_QUOTAS (48) DescribeConfigs Cluster", nil, onCluster(authz.OpDescribeConfigs), clusterD, describeQuotas},
		{"ALTER_CLIENT_QUOTAS (49) AlterConfigs Cluster", nil, onCluster(authz.OpAlterConfigs), clusterD, alterQuotas},
		{"DESCRIBE_USER_SCRAM_CREDENTIALS (50) Describe Cluster", nil, onCluster(authz.OpDescribe), clusterD, describeScram},
		{"ALTER_USER_SCRAM_CREDENTIALS (51) Alter Cluster", nil, onCluster(authz.OpAlter), clusterD, alterScram},
		{"DESCRIBE_CLUSTER (60) Describe Cluster (cluster_authorized_operations; Kafka's code checks nothing else)", nil, onCluster(authz.OpDescribe), clusterD, describeClusterOps},
		{"DESCRIBE_PRODUCERS (61) Read Topic", nil, onTopic(authz.OpRead), topicD, describeProducers},
		{"DESCRIBE_TRANSACTIONS (65) Describe TransactionalId", nil, onTxn(authz.OpDescribe), txnD, describeTxns},
		{"CONSUMER_GROUP_HEARTBEAT (68) Read Group", []tableACL{onTopic(authz.OpDescribe)}, onGroup(authz.OpRead), groupD, groupRead(cgh)},
		// KAFKA-18813 (Kafka 4.0): every topic subscribed to by name needs
		// DESCRIBE, else the whole heartbeat is TOPIC_AUTHORIZATION_FAILED
		// (librdkafka test 0109 with TEST_CONSUMER_GROUP_PROTOCOL=consumer).
		{"CONSUMER_GROUP_HEARTBEAT (68) Describe Topic (KAFKA-18813)", []tableACL{onGroup(authz.OpRead)}, onTopic(authz.OpDescribe), topicD, groupRead(cgh)},
		{"CONSUMER_GROUP_DESCRIBE (69) Describe Group (Kafka's code; its table says Read)", nil, onGroup(authz.OpDescribe), groupD, consumerGroupDescribe},
		// Last: it deletes g1, which OFFSET_DELETE needs.
		{"DELETE_GROUPS (42) Delete Group", nil, onGroup(authz.OpDelete), groupD, deleteGroups},
	}
	// Give g1 a committed offset so LIST_GROUPS has it to show or hide.
	gcl := as(tb, "admin", kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("t1"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	gcl.PollFetches(ctx)
	if err := gcl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	gcl.Close()

	for _, r := range rows {
		setACLs(t, ctx, admin, r.others)
		if got := r.send(); got != r.denied {
			t.Errorf("%s: without the ACL: %v, want %v", r.row, kerr.ErrorForCode(got), kerr.ErrorForCode(r.denied))
		}
		setACLs(t, ctx, admin, append(r.others, r.grant))
		if got := r.send(); authzCode(got) {
			t.Errorf("%s: with the ACL: still %v", r.row, kerr.ErrorForCode(got))
		}
	}

	// Rows whose ACL Kafka's code does not ask for (Kafka 3.x KafkaApis).
	// PRODUCE (0) IdempotentWrite Cluster: since KIP-679 an idempotent
	// producer is authorized when it gets its producer id (the
	// INIT_PRODUCER_ID rows above); its produce needs WRITE on the topic
	// only, as any other.
	setACLs(t, ctx, admin, []tableACL{onTopic(authz.OpWrite)})
	idem := kmsg.NewPtrProduceRequest()
	idem.Acks, idem.TimeoutMillis = -1, 5000
	{
		h := recordtest.NoProducer
		h.BaseTimestamp = time.Now().UnixMilli()
		h.ProducerID, h.ProducerEpoch, h.BaseSequence = 7, 0, 0
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "t1"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recordtest.Batch(h, record.Record{Value: []byte("v")})
		rt.Partitions = append(rt.Partitions, rp)
		idem.Topics = append(idem.Topics, rt)
	}
	if code := send(idem).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Errorf("PRODUCE (0) IdempotentWrite Cluster: an idempotent batch with WRITE on the topic alone: %v, want success (Kafka 3.x checks it at INIT_PRODUCER_ID)", kerr.ErrorForCode(code))
	}
	// WRITE_TXN_MARKERS (27) Alter Cluster: Kafka's handleWriteTxnMarkersRequest
	// asks CLUSTER_ACTION only (the ClusterAction row above); ALTER on the
	// cluster is not enough.
	setACLs(t, ctx, admin, []tableACL{onCluster(authz.OpAlter)})
	if code := writeMarkers(); code != clusterD {
		t.Errorf("WRITE_TXN_MARKERS (27) Alter Cluster: %v with ALTER alone, want CLUSTER_AUTHORIZATION_FAILED (Kafka's code asks CLUSTER_ACTION)", kerr.ErrorForCode(code))
	}
	// SASL_HANDSHAKE (17), API_VERSIONS (18) and SASL_AUTHENTICATE (36) need
	// no ACL: every connection of bob's above made them without one.
	// UNREGISTER_BROKER (64) Alter Cluster is served by a cluster only:
	// TestACLsAcrossBrokers checks it.

	// LIST_TRANSACTIONS (66) Describe TransactionalId: ids the principal may
	// not describe are left out (checked with a real transaction).
	setACLs(t, ctx, admin, nil)
	txp := as(tb, "admin", kgo.TransactionalID("tx1"), kgo.DefaultProduceTopic("t1"))
	if err := txp.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txp.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	listed := func() bool {
		for _, st := range send(kmsg.NewPtrListTransactionsRequest()).(*kmsg.ListTransactionsResponse).TransactionStates {
			if st.TransactionalID == "tx1" {
				return true
			}
		}
		return false
	}
	if listed() {
		t.Error("LIST_TRANSACTIONS (66) Describe TransactionalId: listed without the ACL")
	}
	setACLs(t, ctx, admin, []tableACL{onTxn(authz.OpDescribe)})
	if !listed() {
		t.Error("LIST_TRANSACTIONS (66) Describe TransactionalId: not listed with the ACL")
	}
	if err := txp.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	// The table's other rows are broker-to-broker or controller APIs
	// (LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN,
	// WRITE_TXN_MARKERS, ALTER_REPLICA_LOG_DIRS, the delegation-token APIs,
	// VOTE, BEGIN/END_QUORUM_EPOCH, DESCRIBE_QUORUM, ALTER_PARTITION,
	// UPDATE_FEATURES, ENVELOPE, FETCH_SNAPSHOT, BROKER_REGISTRATION,
	// BROKER_HEARTBEAT, UNREGISTER_BROKER, ALLOCATE_PRODUCER_IDS,
	// CONTROLLER_REGISTRATION, telemetry, ASSIGN_REPLICAS_TO_DIRS,
	// LIST_CLIENT_METRICS_RESOURCES, DESCRIBE_TOPIC_PARTITIONS and the
	// share-group APIs): Strata serves none of them to clients.
	vers := send(kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
	notServed := map[int16]bool{4: true, 5: true, 6: true, 7: true, 34: true, 38: true, 39: true, 40: true, 41: true,
		52: true, 53: true, 54: true, 55: true, 56: true, 57: true, 58: true, 59: true, 62: true, 63: true, 64: true, 67: true,
		70: true, 71: true, 72: true, 73: true, 74: true, 75: true, 76: true, 77: true, 78: true, 79: true, 83: true, 84: true,
		85: true, 86: true, 87: true}
	for _, k := range vers.ApiKeys {
		if notServed[k.ApiKey] {
			t.Errorf("ApiVersions advertises %s (%d): its authorization is not implemented", kmsg.NameForKey(k.ApiKey), k.ApiKey)
		}
	}
}
