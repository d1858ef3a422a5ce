package cleaner

import "github.com/strata-io/strata/internal/storage"

// abortedTxn is one aborted transaction of the log (a .txnindex entry).
type abortedTxn struct{ ProducerID, FirstOffset, LastOffset, LastStableOffset int64 }

// abortedTransactions returns the aborted transactions of l overlapping
// [from, to), and ok=false when storage cannot tell: the cleaner then
// leaves transactional data alone (copied unchanged, never mapped).
func abortedTransactions(l *storage.Log, from, to int64) ([]abortedTxn, bool) {
	return nil, false
}

// producerEpochs returns the current epoch of every producer with live
// state in l, and ok=false when storage cannot tell: no marker is removed
// then.
func producerEpochs(l *storage.Log) (map[int64]int16, bool) {
	return nil, false
}
