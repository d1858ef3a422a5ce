package server_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// unregisterBroker sends UnregisterBroker (64) for id through addr.
func unregisterBroker(t *testing.T, addr string, id int32) error {
	t.Helper()
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	resp := request(t, addr, req).(*kmsg.UnregisterBrokerResponse)
	return kerr.ErrorForCode(resp.ErrorCode)
}

// brokersOf lists the broker ids addr's Metadata reports.
func brokersOf(t *testing.T, addr string) []int32 {
	t.Helper()
	md := request(t, addr, kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	var ids []int32
	for _, b := range md.Brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	return ids
}

// TestUnregisterBroker: UnregisterBroker (64, KIP-631) as Kafka's
// controller answers it (ReplicationControlManager.unregisterBroker): an
// id with no registration is BROKER_ID_NOT_REGISTERED (102) — an unknown
// id, and a broker stopped for good (its registration lapsed with its
// session); a registered broker's registration is removed, running or not
// (Kafka does not refuse a running one: its heartbeats then fail), so the
// cluster no longer lists it and it leaves every ISR; asked again, 102.
func TestUnregisterBroker(t *testing.T) {
	c := startCluster(t, 4, map[string]string{"auto.leader.rebalance.enable": "false"})
	addr := c.Brokers[0].Addr()
	createAssigned(t, c, "u", [][]int32{{1, 3}})
	if err := unregisterBroker(t, addr, 9); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("unknown broker: %v", err)
	}
	c.Brokers[3].Close() // broker 4 (broker-only) stops for good
	eventually(t, "broker 4 gone", func() error {
		if ids := brokersOf(t, addr); slices.Contains(ids, 4) {
			return fmt.Errorf("brokers %v", ids)
		}
		return nil
	})
	if err := unregisterBroker(t, addr, 4); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("stopped broker: %v", err)
	}
	if err := unregisterBroker(t, addr, 3); err != nil {
		t.Fatalf("registered broker 3: %v", err)
	}
	eventually(t, "broker 3 unregistered", func() error {
		if ids := brokersOf(t, c.Brokers[1].Addr()); !slices.Equal(ids, []int32{1, 2}) {
			return fmt.Errorf("brokers %v", ids)
		}
		if _, isr := partitionState(t, addr, "u", 0); !slices.Equal(isr, []int32{1}) {
			return fmt.Errorf("isr %v", isr)
		}
		return nil
	})
	if err := unregisterBroker(t, addr, 3); !errors.Is(err, kerr.BrokerIDNotRegistered) {
		t.Fatalf("broker 3 again: %v", err)
	}
}
