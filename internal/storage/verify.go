package storage

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Transaction verification on the partition leader (KIP-890 part 1, as
// Kafka's UnifiedLog and ProducerStateManager keep it): a transactional
// produce whose producer has no transaction open in this partition must be
// verified with the transaction coordinator (AddPartitionsToTxn v4
// VerifyOnly) before it is appended. The leader starts a verification with
// StartTxnVerification, which gives a VerificationGuard held per producer
// id (Kafka's VerificationStateEntry); the append carries the guard back
// (AppendOptions.TxnGuard) and is refused INVALID_TXN_STATE unless the log
// still holds that same guard. Any transactional batch of the producer
// (its first data batch, which opens the transaction, or a marker, which
// ends it) clears the guard, so a verification that started before a
// transaction ended cannot admit a produce into the next one (the ABA case
// Kafka's comment in analyzeAndValidateProducerState describes), and once
// the transaction is open here later produces need no verification: only
// the first produce of a transaction to a partition pays the round trip.

// VerificationGuard is one verification of a producer's transactional
// produce to a partition (Kafka's VerificationGuard); guards are compared
// by identity.
type VerificationGuard struct {
	pid       int64
	createdMs int64
}

// verifyGuardSweep is the number of guards a log holds before it drops
// those older than verifyGuardMaxAgeMs (verifications whose produce never
// came, e.g. refused by the coordinator). Kafka expires them after
// producer.id.expiration.ms; a dropped guard only makes its late produce
// verify again.
const (
	verifyGuardSweep    = 1024
	verifyGuardMaxAgeMs = 10 * 60 * 1000
)

// StartTxnVerification returns the guard a transactional produce of
// producer pid must carry, creating it when none is held (Kafka's
// maybeStartTransactionVerification), or nil when pid's transaction is
// open in this partition: no verification is needed then.
func (l *Log) StartTxnVerification(pid int64) *VerificationGuard {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loadProducers() == nil { // else the log failed: the produce fails anyway
		if _, open := l.ps.open[pid]; open {
			return nil
		}
	}
	if g := l.verifying[pid]; g != nil {
		return g
	}
	now := l.now().UnixMilli()
	if l.verifying == nil {
		l.verifying = map[int64]*VerificationGuard{}
	}
	if len(l.verifying) >= verifyGuardSweep {
		for id, g := range l.verifying {
			if now-g.createdMs >= verifyGuardMaxAgeMs {
				delete(l.verifying, id)
			}
		}
	}
	g := &VerificationGuard{pid: pid, createdMs: now}
	l.verifying[pid] = g
	return g
}

// checkTxnVerified refuses a transactional data batch of pid whose
// transaction is not open here unless guard is the one the log holds
// (under l.mu; Kafka's batchMissingRequiredVerification).
func (l *Log) checkTxnVerified(pid int64, guard *VerificationGuard) error {
	if g := l.verifying[pid]; g != nil && g == guard {
		return nil
	}
	return fmt.Errorf("transactional produce of producer %d not verified with its transaction coordinator (the transaction ended meanwhile or was never verified here): %w", pid, kerr.InvalidTxnState)
}
