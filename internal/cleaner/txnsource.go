package cleaner

import "github.com/strata-io/strata/internal/storage"

// abortedTxn is one aborted transaction of the log (a .txnindex entry).
type abortedTxn = storage.AbortedTxn

// abortedTransactions returns the aborted transactions of l overlapping
// [from, to). ok=false would mean storage cannot tell: the cleaner then
// leaves transactional data alone (copied unchanged, never mapped).
func abortedTransactions(l *storage.Log, from, to int64) ([]abortedTxn, bool) {
	return l.AbortedTransactions(from, to), true
}

// producerEpochs returns the current epoch of every producer with live
// state in l. ok=false would mean storage cannot tell: no marker is
// removed then.
func producerEpochs(l *storage.Log) (map[int64]int16, bool) {
	ps := l.Producers()
	m := make(map[int64]int16, len(ps))
	for _, p := range ps {
		m[p.ProducerID] = p.Epoch
	}
	return m, true
}
