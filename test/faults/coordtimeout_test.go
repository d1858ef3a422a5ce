package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCoordinatorWriteTimeout: three broker processes, __consumer_offsets
// and __transaction_state replicated three times with min.insync.replicas
// 3, followers never dropped from the ISR (replica.lag.time.max.ms and the
// session timeout ten minutes). A follower of the group's and the
// transactional id's partitions is paused (SIGSTOP), so no coordinator
// write can be replicated: an OffsetCommit is answered
// COORDINATOR_NOT_AVAILABLE after offsets.commit.timeout.ms (Kafka's
// GroupCoordinatorService write timeout mapped by
// CoordinatorOperationExceptionHelper) and an InitProducerId after the
// transaction timeout (TransactionStateManager.appendTransactionToLog),
// never success; the committed offset stays what it was and the
// coordinator goes on answering reads. Once the follower resumes, commits
// and InitProducerId succeed again.
func TestCoordinatorWriteTimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	procs, addrs := replicatedCluster(t, ctx,
		"--min.insync.replicas", "3", "--transaction.state.log.min.isr", "3",
		"--replica.lag.time.max.ms", "600000", "--broker.session.timeout.ms", "600000",
		"--offsets.commit.timeout.ms", "3000",
		"--offsets.topic.num.partitions", "3", "--transaction.state.log.num.partitions", "3")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	admin := kadm.NewClient(cl)
	if _, err := admin.CreateTopic(ctx, 1, 3, nil, "t"); err != nil {
		t.Fatal(err)
	}
	const group = "g"
	untilNoErr(t, ctx, "first commit", func() error {
		offs := kadm.Offsets{}
		offs.AddOffset("t", 0, 10, -1)
		r, err := admin.CommitOffsets(ctx, group, offs)
		if err != nil {
			return err
		}
		return r.Error()
	})
	gc := coordinatorIndex(ctx, addrs, 0, group)
	if gc < 0 {
		t.Fatal("no group coordinator")
	}
	// A transactional id coordinated by the same broker, initialized
	// before the pause.
	txnID := ""
	untilNoErr(t, ctx, "a transactional id coordinated by broker "+fmt.Sprint(gc+1), func() error {
		for i := 0; i < 50; i++ {
			id := fmt.Sprintf("tx-%d", i)
			if coordinatorIndex(ctx, addrs, 1, id) == gc {
				txnID = id
				return nil
			}
		}
		return fmt.Errorf("none of 50 ids")
	})
	coord, err := kgo.NewClient(kgo.SeedBrokers(addrs[gc]))
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	send := func(req kmsg.Request) (kmsg.Response, error) {
		rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
		defer rcancel()
		return coord.SeedBrokers()[0].Request(rctx, req)
	}
	initPID := func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID, req.TransactionTimeoutMillis = 4, &txnID, 3000
		req.ProducerID, req.ProducerEpoch = -1, -1
		resp, err := send(req)
		if err != nil {
			t.Fatalf("InitProducerId: %v", err)
		}
		return resp.(*kmsg.InitProducerIDResponse).ErrorCode
	}
	commit := func(off int64) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Version, req.Group, req.Generation = 8, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = 0, off, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := send(req)
		if err != nil {
			t.Fatalf("OffsetCommit: %v", err)
		}
		return resp.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	committed := func() (int64, error) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 8
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = group
		req.Groups = append(req.Groups, rg)
		resp, err := send(req)
		if err != nil {
			return 0, err
		}
		g := resp.(*kmsg.OffsetFetchResponse).Groups[0]
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return 0, err
		}
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == "t" && rp.Partition == 0 {
					return rp.Offset, kerr.ErrorForCode(rp.ErrorCode)
				}
			}
		}
		return -1, nil
	}
	untilNoErr(t, ctx, "InitProducerId before the pause", func() error { return kerr.ErrorForCode(initPID()) })

	victim := procs[(gc+1)%3]
	t.Logf("coordinator %s; SIGSTOP %s (a follower of its partitions)", procs[gc].Name(), victim.Name())
	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = victim.Resume()
		}
	}()
	if code := commit(20); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("OffsetCommit that cannot be replicated: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
	if off, err := committed(); err != nil || off != 10 {
		t.Fatalf("committed offset after the refused commit: %d (%v), want 10", off, err)
	}
	if code := initPID(); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("InitProducerId that cannot be replicated: %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}

	if err := victim.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	untilNoErr(t, ctx, "commit after the follower resumed", func() error { return kerr.ErrorForCode(commit(30)) })
	if off, err := committed(); err != nil || off != 30 {
		t.Fatalf("committed offset: %d (%v), want 30", off, err)
	}
	untilNoErr(t, ctx, "InitProducerId after the follower resumed", func() error { return kerr.ErrorForCode(initPID()) })
}

// untilNoErr retries cond every half second until it holds, for up to two
// minutes (a loaded machine), failing the test after.
func untilNoErr(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
