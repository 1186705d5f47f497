// Package bench is Sluice's load generator. Run drives an operation from a
// closed loop of workers (each sends a request and waits for its answer
// before sending the next, so the offered load adapts to the server and
// latencies are not hidden by queueing in the client), for a bounded
// duration or number of requests, and returns a Result: rate, errors and a
// latency histogram with p50, p90, p99 and max; WriteTable prints results.
//
// A Session drives Scenarios at a Sluice server: rate limit checks (HTTP
// and Envoy gRPC), redirects, notifications and a campaign, workflow
// events, resumes and the abandoned cart, and can point
// the same load at another implementation, such as StartBare's servers
// that answer at once.
package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Op sends one request. seq numbers the requests of a run from 0, so
// operations can spread their load over keys. An Op is called from one
// worker goroutine at a time (NewOp makes one per worker).
type Op func(ctx context.Context, seq int64) error

// Options bound a run. At least one of Duration and Requests must be set.
type Options struct {
	// Workers is how many requests are in flight at once; default 1.
	Workers int
	// Duration ends the run after this long; zero means no time bound.
	Duration time.Duration
	// Requests ends the run after this many requests; zero means no count
	// bound.
	Requests int64
}

// Result is what one run measured.
type Result struct {
	Scenario string // what was driven: "check-http"
	Target   string // where: "sluice", "compare", or an address
	Workers  int
	OK       int64 // requests answered as expected
	Errors   int64 // requests that failed or got an unexpected answer
	Elapsed  time.Duration
	// Latency holds the latency of every OK request.
	Latency *Histogram
	// FirstError is the first error seen, for the report; empty when none.
	FirstError string
	// Note is a scenario's extra figure for the table ("refused 12").
	Note string
}

// Rate is OK requests per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.OK) / r.Elapsed.Seconds()
}

// Run calls newOp once per worker and drives the operations until the
// duration or request count is reached or ctx ends. A request cut short by
// the end of the run is neither OK nor an error.
func Run(ctx context.Context, scenario, target string, o Options, newOp func(worker int) Op) (Result, error) {
	if o.Duration <= 0 && o.Requests <= 0 {
		return Result{}, errors.New("bench: a run needs a duration or a request count")
	}
	workers := max(1, o.Workers)
	// The end of the run cancels ctx rather than giving it a deadline: a
	// deadline would travel with the requests (gRPC sends it to the server
	// as grpc-timeout) and could fire there before ctx reports it here,
	// turning requests cut by the end of the run into errors.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if o.Duration > 0 {
		defer time.AfterFunc(o.Duration, cancel).Stop()
	}
	ops := make([]Op, workers)
	for i := range ops {
		ops[i] = newOp(i)
	}
	var (
		next     atomic.Int64
		firstErr sync.Once
		res      = Result{Scenario: scenario, Target: target, Workers: workers, Latency: &Histogram{}}
		mu       sync.Mutex
		wg       sync.WaitGroup
	)
	start := time.Now()
	for _, op := range ops {
		wg.Go(func() {
			var h Histogram
			var ok, failed int64
			for ctx.Err() == nil {
				seq := next.Add(1) - 1
				if o.Requests > 0 && seq >= o.Requests {
					break
				}
				t0 := time.Now()
				err := op(ctx, seq)
				took := time.Since(t0)
				switch {
				case err == nil:
					ok++
					h.Record(took)
				case ctx.Err() != nil:
					// cut short by the end of the run
				default:
					failed++
					firstErr.Do(func() { res.FirstError = err.Error() })
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.OK += ok
			res.Errors += failed
			res.Latency.Merge(&h)
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res, nil
}

// StatusError is an answer with an unexpected HTTP status.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("HTTP %d: %.200s", e.Status, e.Body)
}
