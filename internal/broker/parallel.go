package broker

import (
	"errors"
	"sync"
)

// ioThreads is how many partitions are opened (with recovery) at startup
// and closed (flushed) at shutdown at once: Kafka's
// num.recovery.threads.per.data.dir, per log dir.
func (b *Broker) ioThreads() int {
	return max(b.Config().Int("num.recovery.threads.per.data.dir")*len(b.dirs), 1)
}

// forEach runs fn over items with n goroutines, which it owns and waits
// for, and returns every error joined.
func forEach[T any](n int, items []T, fn func(T) error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		ch   = make(chan T)
	)
	for range min(n, max(len(items), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				if err := fn(it); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
	return errors.Join(errs...)
}
