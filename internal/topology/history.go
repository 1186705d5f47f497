// Package topology checks a production topology of Sluice under faults,
// the way Jepsen does: a harness (topology_test.go) runs three `sluice
// serve` nodes behind HAProxy on clustered engines, drives a workload
// through HAProxy only, injects faults, and records every client request
// and answer in a [History]; checkers then read the history and report
// what clients saw, per fault: rate limits admitted past their limit,
// notifications lost, duplicated or out of order, redirects that failed,
// and the error rate.
//
// The history and the checkers are plain data and functions, with no
// engine or network: each checker has a test that feeds it a bad history.
// The package imports no Sluice service package; it talks to Sluice over
// HTTP and gRPC as a client would.
package topology

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// Kind is what a recorded operation did.
type Kind string

// The operation kinds of the workload.
const (
	// Check is one rate limit check (HTTP or Envoy gRPC), single or
	// multi-key; Keys and Limit say what it counted against.
	Check Kind = "check"
	// Notify is a notification accepted (or not) through the API.
	Notify Kind = "notify"
	// Deliver is a delivery seen at a receiver (webhook or SMTP peer).
	Deliver Kind = "deliver"
	// Status is the final status the API reports for a notification,
	// read after the run.
	Status Kind = "status"
	// Redirect is one GET of a short link's code.
	Redirect Kind = "redirect"
	// Clicks is a link's click count read through the API after the run.
	Clicks Kind = "clicks"
	// Create is one short link creation.
	Create Kind = "create"
	// Delete is one short link deletion: the checkers stop judging the
	// code's redirects from its Start.
	Delete Kind = "delete"
)

// Op is one recorded client operation: a request and its answer, or an
// observation at a receiver. Times are wall-clock, as the client saw them.
type Op struct {
	Kind  Kind      `json:"kind"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Node is the HAProxy frontend or node the request went to ("http",
	// "grpc"), for messages.
	Via string `json:"via,omitempty"`
	// Status is the HTTP status (or, for gRPC, 200 for OK answers and 503
	// for errors); 0 when the request failed before an answer.
	Status int `json:"status"`
	// Err is the client-side error, if any (connection refused, timeout).
	Err string `json:"err,omitempty"`

	// Checks: the keys checked together, the policy window start (the
	// checker groups by key and window), the limit, and the answer.
	Keys    []string  `json:"keys,omitempty"`
	Limit   int64     `json:"limit,omitempty"`
	Window  time.Time `json:"window,omitzero"`
	Allowed bool      `json:"allowed,omitempty"`

	// Notifications: the user, the per-user sequence number, the category,
	// the channel delivered on, the notification id the API gave, and the
	// final status read back (Status ops).
	User     string `json:"user,omitempty"`
	Seq      int    `json:"seq,omitempty"`
	Category string `json:"category,omitempty"`
	Channel  string `json:"channel,omitempty"`
	ID       string `json:"id,omitempty"`
	Final    string `json:"final,omitempty"`
	// Attempts is, on a Status op, the delivery's attempts as the API
	// reports them: more than 1 means an attempt failed and was retried.
	Attempts int `json:"attempts,omitempty"`

	// Links: the code and, for Clicks, the count read back.
	Code  string `json:"code,omitempty"`
	Count int64  `json:"count,omitempty"`
}

// OK reports whether the operation got a non-error answer (not 5xx, not
// a client-side failure).
func (o Op) OK() bool { return o.Err == "" && o.Status != 0 && o.Status < 500 }

// Fault is one injected fault and when it was in force.
type Fault struct {
	Name  string    `json:"name"` // e.g. "kill -9 node 2", "redis latency 500ms node 1"
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Restarts is how many Sluice node processes the fault started
	// afresh (a node killed and restarted: 1). A restarted node's local
	// fallback limiters start empty, so each restart adds one node's
	// share to the fail-open allowance of the windows it overlaps.
	Restarts int `json:"restarts,omitempty"`
}

// During reports whether t falls within the fault, widened by grace on
// each side (effects outlast the fault: a node restarting, a failover).
func (f Fault) During(t time.Time, grace time.Duration) bool {
	return !t.Before(f.Start.Add(-grace)) && !t.After(f.End.Add(grace))
}

// History is everything a run recorded. It is safe for concurrent Add.
type History struct {
	Seed   int64   `json:"seed"`
	Nodes  int     `json:"nodes"` // Sluice nodes, for the fail-open allowance
	Faults []Fault `json:"faults"`

	mu  sync.Mutex
	Ops []Op `json:"ops"`
}

// Add records op.
func (h *History) Add(op Op) {
	h.mu.Lock()
	h.Ops = append(h.Ops, op)
	h.mu.Unlock()
}

// AddFault records a fault.
func (h *History) AddFault(f Fault) {
	h.mu.Lock()
	h.Faults = append(h.Faults, f)
	h.mu.Unlock()
}

// Of returns the recorded operations of kind k, in start order.
func (h *History) Of(k Kind) []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Op
	for _, o := range h.Ops {
		if o.Kind == k {
			out = append(out, o)
		}
	}
	slices.SortStableFunc(out, func(a, b Op) int { return a.Start.Compare(b.Start) })
	return out
}

// WriteFile writes the history as JSON to path, so a failing run can be
// read (and its checkers rerun) later.
func (h *History) WriteFile(path string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, err := json.MarshalIndent(h, "", " ")
	if err != nil {
		return fmt.Errorf("encode history: %w", err)
	}
	return os.WriteFile(path, b, 0o644)
}

// ReadHistory reads a history written by WriteFile.
func ReadHistory(r io.Reader) (*History, error) {
	var h History
	if err := json.NewDecoder(r).Decode(&h); err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	return &h, nil
}
