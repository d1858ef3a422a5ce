package storage

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/vfs"
)

// TestTxnVerificationGuard (KIP-890 part 1, Kafka's VerificationGuard): a
// producer with no transaction open here needs a guard, and only the guard
// the log holds admits its batch; once its transaction is open no guard is
// needed; a guard taken before a marker ended the transaction (a produce
// that arrives after the transaction ended) is refused INVALID_TXN_STATE.
func TestTxnVerificationGuard(t *testing.T) {
	l := openTest(t, vfs.NewCrashFS(), "/d/v-0", txnConfig(), false)
	defer l.Close()
	const pid, epoch = 7, 0
	appendTxn := func(seq int32, g *VerificationGuard) error {
		_, err := l.Append(mkTxnBatch(t, 1, "v", pid, epoch, seq), AppendOptions{LeaderEpoch: 1, VerifyTxn: true, TxnGuard: g})
		return err
	}
	if err := appendTxn(0, nil); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("unverified first batch: %v, want INVALID_TXN_STATE", err)
	}
	g := l.StartTxnVerification(pid)
	if g == nil || l.StartTxnVerification(pid) != g {
		t.Fatal("no guard, or a second guard while one is held")
	}
	if err := appendTxn(0, &VerificationGuard{pid: pid}); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("someone else's guard: %v, want INVALID_TXN_STATE", err)
	}
	if err := appendTxn(0, g); err != nil {
		t.Fatalf("verified first batch: %v", err)
	}
	if l.StartTxnVerification(pid) != nil {
		t.Fatal("a guard asked for while the transaction is open here")
	}
	if err := appendTxn(1, nil); err != nil {
		t.Fatalf("second batch of the open transaction: %v", err)
	}
	// A verification starts, the transaction ends meanwhile: the stale
	// guard admits nothing.
	stale := l.StartTxnVerification(pid)
	if stale != nil {
		t.Fatal("guard while open")
	}
	mustMarker(t, l, pid, epoch, false)
	stale = l.StartTxnVerification(pid) // verifying for the next transaction
	mustMarker(t, l, pid, epoch, false) // ...which the coordinator ends first
	if err := appendTxn(2, stale); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("produce with a guard taken before the transaction ended: %v, want INVALID_TXN_STATE", err)
	}
	if err := appendTxn(2, l.StartTxnVerification(pid)); err != nil {
		t.Fatalf("freshly verified: %v", err)
	}
}
