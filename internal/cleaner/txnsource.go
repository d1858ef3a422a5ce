package cleaner

import "github.com/strata-io/strata/internal/storage"

// abortedTxn is one aborted transaction of the log (a .txnindex entry).
type abortedTxn = storage.AbortedTxn

// producerEpochs returns the current epoch of every producer with live
// state in l.
func producerEpochs(l *storage.Log) map[int64]int16 {
	ps := l.Producers()
	m := make(map[int64]int16, len(ps))
	for _, p := range ps {
		m[p.ProducerID] = p.Epoch
	}
	return m
}
