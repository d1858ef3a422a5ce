package server_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestDeleteACLsAcrossBrokersLinearizable: DeleteAcls decides on the
// store, not on the receiving broker's view: right after CreateAcls
// returned through broker 1, a deletion through broker 2 lists the
// binding (its view may not have it yet), and of two deletions of one
// binding racing through brokers 2 and 3, exactly one lists it. Deciding
// on each broker's view, the first could list nothing and leave the
// binding in place, and both could list it (found by the metadata
// checker under faults: checker.ACLModel).
func TestDeleteACLsAcrossBrokersLinearizable(t *testing.T) {
	c := startSecureCluster(t)
	ctx := ctxT(t)
	admins := make([]*kadm.Client, len(c.Brokers))
	for i, b := range c.Brokers {
		admins[i] = kadm.NewClient(onBroker(t, b, "admin"))
	}
	binding := func(round int) *kadm.ACLBuilder {
		return kadm.NewACLs().Allow(fmt.Sprintf("User:u%d", round)).AllowHosts().Topics("acl-linear").
			Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	}
	deleted := func(res kadm.DeleteACLsResults, err error) (int, error) {
		if err != nil {
			return 0, err
		}
		n := 0
		for _, r := range res {
			if r.Err != nil {
				return 0, r.Err
			}
			n += len(r.Deleted)
		}
		return n, nil
	}
	for round := range 20 {
		mustACL(t, admins[0], binding(round))
		n, err := deleted(admins[1].DeleteACLs(ctx, binding(round)))
		if err != nil || n != 1 {
			t.Fatalf("round %d: delete through broker 2 right after the create through broker 1: %d deleted, %v", round, n, err)
		}
		mustACL(t, admins[0], binding(round))
		var wg sync.WaitGroup
		counts, errs := make([]int, 2), make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() { // owner: this round, which waits for it
				defer wg.Done()
				counts[i], errs[i] = deleted(admins[1+i].DeleteACLs(ctx, binding(round)))
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil || counts[0]+counts[1] != 1 {
			t.Fatalf("round %d: two racing deletions listed %v binding(s) (errors %v); exactly one may", round, counts, errs)
		}
	}
}
