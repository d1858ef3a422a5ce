package parallel

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

func TestForEachRunsEveryIndexOnce(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{{0, 4}, {1, 4}, {5, 1}, {5, 0}, {5, -3}, {7, 3}, {1000, 8}, {3, 100}} {
		t.Run(fmt.Sprintf("n=%d/workers=%d", tc.n, tc.workers), func(t *testing.T) {
			seen := make([]atomic.Int32, tc.n)
			if err := ForEach(tc.n, tc.workers, func(i int) error {
				seen[i].Add(1)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			for i := range seen {
				if c := seen[i].Load(); c != 1 {
					t.Fatalf("index %d ran %d times", i, c)
				}
			}
		})
	}
}

// TestForEachBoundsWorkers holds every call until as many as the bound
// allows run at once: the bound is reached and never passed.
func TestForEachBoundsWorkers(t *testing.T) {
	const n, workers = 40, 4
	var (
		mu      sync.Mutex
		running int
		most    int
		full    = make(chan struct{})
		once    sync.Once
	)
	err := ForEach(n, workers, func(i int) error {
		mu.Lock()
		running++
		most = max(most, running)
		if running == workers {
			once.Do(func() { close(full) })
		}
		mu.Unlock()
		<-full // the first calls wait until the bound is reached
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if most != workers {
		t.Fatalf("at most %d calls ran at once, want %d", most, workers)
	}
}

func TestForEachRunsInlineForOneWorker(t *testing.T) {
	before := runtime.NumGoroutine()
	var during []int
	ForEach(3, 1, func(int) error {
		during = append(during, runtime.NumGoroutine()) // no lock: one goroutine
		return nil
	})
	for _, g := range during {
		if g > before {
			t.Fatalf("a bound of 1 started goroutines: %d running, %d before", g, before)
		}
	}
}

func TestForEachJoinsEveryErrorInIndexOrder(t *testing.T) {
	errOdd := errors.New("odd")
	for _, workers := range []int{1, 4} {
		var ran atomic.Int32
		err := ForEach(10, workers, func(i int) error {
			ran.Add(1)
			if i%2 == 1 {
				return fmt.Errorf("index %d: %w", i, errOdd)
			}
			return nil
		})
		if ran.Load() != 10 {
			t.Fatalf("workers=%d: %d calls ran after errors, want all 10", workers, ran.Load())
		}
		if !errors.Is(err, errOdd) {
			t.Fatalf("workers=%d: err %v does not wrap errOdd", workers, err)
		}
		want := "index 1: odd\nindex 3: odd\nindex 5: odd\nindex 7: odd\nindex 9: odd"
		if err.Error() != want {
			t.Fatalf("workers=%d: err %q, want %q", workers, err, want)
		}
	}
}

func TestEach(t *testing.T) {
	items := []string{"a", "b", "c", "d"}
	var mu sync.Mutex
	got := map[string]bool{}
	err := Each(items, 2, func(s string) error {
		mu.Lock()
		got[s] = true
		mu.Unlock()
		if s == "c" {
			return errors.New("c failed")
		}
		return nil
	})
	if err == nil || err.Error() != "c failed" {
		t.Fatalf("err %v, want c failed", err)
	}
	if len(got) != len(items) {
		t.Fatalf("ran %v, want every item", got)
	}
}

// TestDoRunsAtOnce: every fn of Do runs at the same time (each waits for
// all to have started).
func TestDoRunsAtOnce(t *testing.T) {
	const n = 3
	var started sync.WaitGroup
	started.Add(n)
	var ran atomic.Int32
	fn := func() {
		started.Done()
		started.Wait()
		ran.Add(1)
	}
	Do(fn, fn, fn)
	if ran.Load() != n {
		t.Fatalf("%d of %d ran", ran.Load(), n)
	}
}
