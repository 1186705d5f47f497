package ratelimittest

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Flood calls try from workers goroutines at once, each times per
// goroutine, and returns how many calls were allowed. A call's error
// fails t (with t.Error, so any goroutine may) and ends its goroutine.
func Flood(t testing.TB, workers, each int, try func() (allowed bool, err error)) int {
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				ok, err := try()
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(allowed.Load())
}
