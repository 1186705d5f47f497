package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
)

// RunTimes is what a workflow run's record (GET /v1/workflow-runs/{id})
// says of how it moved, every time on the server's clock.
type RunTimes struct {
	ID     string
	Status string // running, waiting, completed, canceled or failed
	// Resume is from the event that ended the run's first wait_for (the
	// engine stamps the event's created time as that step's end) to the
	// start of the step after it. Resumed reports such a wait_for with a
	// next step started.
	Resume  time.Duration
	Resumed bool
	// Late is how long after its deadline (the step's until) the run's
	// first timed-out wait_for ended. TimedOut reports one.
	Late     time.Duration
	TimedOut bool
	// Took is from the run's creation to its last update: its whole
	// length once it is final.
	Took time.Duration
	// Path is the steps it ran, by name (the kind for an unnamed one), in
	// order.
	Path []string
}

// Final reports a run that can move no more.
func (r RunTimes) Final() bool {
	return r.Status == "completed" || r.Status == "canceled" || r.Status == "failed"
}

// runRecord is the part of a run's JSON RunTimes reads: the steps' until
// is there, though client.RunStep leaves it out.
type runRecord struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Steps  []struct {
		Name      string    `json:"name"`
		Kind      string    `json:"kind"`
		Status    string    `json:"status"`
		StartedAt time.Time `json:"started_at"`
		EndedAt   time.Time `json:"ended_at"`
		Until     time.Time `json:"until"`
		Outcome   string    `json:"outcome"`
	} `json:"steps"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (rec runRecord) times() RunTimes {
	t := RunTimes{ID: rec.ID, Status: rec.Status, Took: rec.UpdatedAt.Sub(rec.CreatedAt)}
	for i, st := range rec.Steps {
		t.Path = append(t.Path, cmpName(st.Name, st.Kind))
		if st.Kind != "wait_for" || st.Status != "completed" || st.EndedAt.IsZero() {
			continue
		}
		switch {
		case strings.HasPrefix(st.Outcome, "event ") && !t.Resumed && i+1 < len(rec.Steps):
			t.Resume, t.Resumed = rec.Steps[i+1].StartedAt.Sub(st.EndedAt), true
		case st.Outcome == "timed out" && !t.TimedOut && !st.Until.IsZero():
			t.Late, t.TimedOut = st.EndedAt.Sub(st.Until), true
		}
	}
	return t
}

func cmpName(name, kind string) string {
	if name != "" {
		return name
	}
	return kind
}

// ReadRun reads run id's record and what it says of its waits.
func ReadRun(ctx context.Context, c *client.Client, id string) (RunTimes, error) {
	var rec runRecord
	if err := c.Do(ctx, http.MethodGet, "/v1/workflow-runs/"+url.PathEscape(id), nil, &rec); err != nil {
		return RunTimes{}, fmt.Errorf("read run %s: %w", id, err)
	}
	return rec.times(), nil
}

// AwaitRuns reads each of ids until done holds for it, a round every
// 100 ms for at most within, and returns their last reads in the order
// of ids. It fails, with the reads so far, when some are not done by then.
func AwaitRuns(ctx context.Context, c *client.Client, ids []string, within time.Duration, done func(RunTimes) bool) ([]RunTimes, error) {
	out := make([]RunTimes, len(ids))
	pending := make([]int, len(ids))
	for i := range pending {
		pending[i] = i
	}
	deadline := time.Now().Add(within)
	for {
		var still []int
		for _, i := range pending {
			t, err := ReadRun(ctx, c, ids[i])
			if err != nil {
				return out, err
			}
			out[i] = t
			if !done(t) {
				still = append(still, i)
			}
		}
		if pending = still; len(pending) == 0 {
			return out, nil
		}
		if time.Now().After(deadline) {
			first := out[pending[0]]
			return out, fmt.Errorf("%d of %d runs not there after %v (run %s is %s after %s)",
				len(pending), len(ids), within, first.ID, first.Status, strings.Join(first.Path, ", "))
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling interval
		}
	}
}

// Paced sends n requests at rate a second, open loop: the i-th is due at
// the start plus i/rate, whatever became of the earlier ones, from up to
// workers callers at once (when every caller is busy the next request is
// late, and the Result's rate shows the rate achieved). Latency is each
// op's own, not its wait for its time.
func Paced(ctx context.Context, scenario, target string, rate float64, n int64, workers int, op Op) (Result, error) {
	if rate <= 0 || n <= 0 {
		return Result{}, fmt.Errorf("bench: a paced run needs a positive rate and count (%g, %d)", rate, n)
	}
	workers = max(1, workers)
	interval := time.Duration(float64(time.Second) / rate)
	hs := make([]*Histogram, workers)
	start := time.Now()
	res, err := Run(ctx, scenario, target, Options{Workers: workers, Requests: n}, func(w int) Op {
		h := &Histogram{}
		hs[w] = h
		return func(ctx context.Context, seq int64) error {
			if d := time.Until(start.Add(time.Duration(seq) * interval)); d > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
			began := time.Now()
			err := op(ctx, seq)
			if err == nil {
				h.Record(time.Since(began))
			}
			return err
		}
	})
	res.Elapsed = time.Since(start) // from the schedule's start, a little before Run's
	res.Latency = &Histogram{}
	for _, h := range hs {
		res.Latency.Merge(h)
	}
	return res, err
}
