package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/client"
)

// The two ways through cartWorkflow, by step name.
var (
	cartOrdered  = []string{"pause", "wait_order", "check", "follow_up"}
	cartReminded = []string{"pause", "wait_order", "check", "remind", "follow_up"}
)

// cart takes CartUsers users through the abandoned cart (cartWorkflow):
// their cart.abandoned events go in batches of 1,000, and every other user
// places the order cartOrderDelay after their batch was accepted. It
// reports the time from the first event to the last run ended, the runs
// a second, and fails unless every run completed: none lost, none failed.
func cart(ctx context.Context, s *Session) ([]Result, error) {
	o := s.Workflows.withDefaults()
	if err := s.putWorkflow(ctx, "bench-cart", cartWorkflow); err != nil {
		return nil, err
	}
	before, err := s.runsEnded(ctx, "bench-cart")
	if err != nil {
		return nil, err
	}
	remindLabels := []string{`workflow="bench-cart"`, `step="remind"`, `status="completed"`}
	remindBefore, err := s.metricSum(ctx, "sluice_workflow_steps_total", remindLabels...)
	if err != nil {
		return nil, err
	}
	run := rand.Text()[:8]
	user := func(i int) string { return "bench-" + run + "-c" + strconv.Itoa(i) }
	carts := make([]client.Event, o.CartUsers)
	for i := range carts {
		carts[i] = client.Event{RequestID: user(i) + "-cart", Name: "bench.cart.abandoned", UserID: user(i),
			Data: map[string]any{"cart_id": "c" + strconv.Itoa(i), "total": 6997, "currency": "EUR"}}
	}
	orders := &orderTally{res: Result{Scenario: "cart-order", Target: targetSluice, Latency: &Histogram{}}}
	var placing sync.WaitGroup
	c := s.batchClient()
	start := time.Now()
	started, ids, err := s.startRuns(ctx, "cart-start", carts, func(lo, hi int) {
		at := time.Now().Add(cartOrderDelay)
		placing.Go(func() { orders.place(ctx, c, at, lo, hi, user) })
	})
	placing.Wait()
	started.Note = fmt.Sprintf("cart.abandoned in batches of %d, each starting a run", eventBatch)
	orders.res.Elapsed = time.Since(start)
	orders.res.Note = fmt.Sprintf("order.placed for every other user, %s after its cart's batch: %d orders found no run waiting (those runs remind)",
		cartOrderDelay, orders.missed)
	out := []Result{started, orders.res}
	if err != nil {
		return out, err
	}
	runs, err := s.awaitEnded(ctx, "cart-runs", "bench-cart", before, started.OK, start)
	out = append(out, runs)
	if err != nil {
		return out, err
	}
	reminded, err := s.metricSum(ctx, "sluice_workflow_steps_total", remindLabels...)
	if err != nil {
		return out, err
	}
	late, err := s.checkCartRuns(ctx, &out[2], nonEmpty(ids))
	out[2].Note = fmt.Sprintf("first event to last run ended %s, runs/s over it; %d completed, %d reminded, %d ordered; "+
		"latency: a run's creation to its end, %d sampled; their order's deadline ended late by %s (p50 / p99)",
		FormatDuration(runs.Elapsed), runs.OK, reminded-remindBefore, runs.OK-(reminded-remindBefore), out[2].Latency.Count(), quantiles(late))
	if err == nil && runs.OK != started.OK {
		err = fmt.Errorf("%d runs started, %d completed", started.OK, runs.OK)
	}
	return out, err
}

// checkCartRuns reads a sample of the runs: each must have completed one
// of the two ways through the cart. Their lengths go in res's latency;
// it returns how late the waits that timed out ended.
func (s *Session) checkCartRuns(ctx context.Context, res *Result, ids []string) (*Histogram, error) {
	late := &Histogram{}
	times, err := AwaitRuns(ctx, s.c, sample(ids, runSample), s.drainTimeout(), RunTimes.Final)
	if err != nil {
		return late, err
	}
	for _, t := range times {
		if t.Status != "completed" || (!slices.Equal(t.Path, cartOrdered) && !slices.Equal(t.Path, cartReminded)) {
			return late, fmt.Errorf("run %s is %s after %v, want completed after %v or %v", t.ID, t.Status, t.Path, cartOrdered, cartReminded)
		}
		res.Latency.Record(t.Took)
		if t.TimedOut {
			late.Record(t.Late)
		}
	}
	return late, nil
}

// orderTally is what the cart's orders did. Safe for concurrent use.
type orderTally struct {
	mu     sync.Mutex
	res    Result // OK: orders that resumed a run; Errors: orders refused or not sent
	missed int    // orders accepted that found no run waiting
}

// place sends, at at, the orders of the even users of [lo, hi) in one
// batch.
func (o *orderTally) place(ctx context.Context, c *client.Client, at time.Time, lo, hi int, user func(int) string) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(at)):
	}
	var es []client.Event
	for i := lo + lo%2; i < hi; i += 2 {
		es = append(es, client.Event{RequestID: user(i) + "-order", Name: "bench.order.placed", UserID: user(i),
			Data: map[string]any{"cart_id": "c" + strconv.Itoa(i)}})
	}
	began := time.Now()
	results, err := c.SendEvents(ctx, es)
	took := time.Since(began)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.res.Errors += int64(len(es))
		o.res.FirstError = cmp.Or(o.res.FirstError, err.Error())
		return
	}
	o.res.Latency.Record(took)
	for _, r := range results {
		switch {
		case r.Status != "accepted":
			o.res.Errors++
			o.res.FirstError = cmp.Or(o.res.FirstError, fmt.Sprintf("order %s: %v", r.Status, r.Error))
		case len(r.RunsResumed) == 1:
			o.res.OK++
		default:
			o.missed++
		}
	}
}
