package store

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/workflow"
)

// TestWorkflowOncePerUnbatched is the conformance suite's once_per race
// without group commit: each event is a transaction of its own, eight of
// them at a time, so on PostgreSQL two events of one user really overlap
// (the suite's events mostly share a batch). 20 events for one user let
// go at once start exactly one run, ten times over.
func TestWorkflowOncePerUnbatched(t *testing.T) {
	t.Parallel()
	for _, e := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "sluice.db") }},
		{"postgres", func(t *testing.T) string { return enginetest.PostgresSchema(t, enginetest.PostgresURL(t)) }},
	} {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, err := Open(ctx, Options{URL: e.url(t), MaxOpenConns: 12, MaxBatch: 1, Writers: 8})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			t.Cleanup(func() { _ = db.Close() })
			if _, err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			t0 := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
			if _, err := db.PutWorkflow(ctx, workflow.Stored{Key: "onboard", Trigger: "signed_up", Definition: json.RawMessage(`{}`)}, t0); err != nil {
				t.Fatal(err)
			}
			started := map[string]int{}
			for u := range 10 { // a round per user: 20 events at once
				var (
					wg   sync.WaitGroup
					mu   sync.Mutex
					gate = make(chan struct{})
				)
				user := fmt.Sprintf("u%d", u)
				for i := range 20 {
					wg.Go(func() {
						id := fmt.Sprintf("%d_%d", u, i)
						at := t0.Add(time.Duration(i) * time.Millisecond)
						run := workflow.Run{ID: "run_" + id, Workflow: "onboard", Version: 1, UserID: user, Status: workflow.StatusRunning,
							Data: json.RawMessage(`{}`), DueAt: at, EventID: "evt_" + id, CreatedAt: at, UpdatedAt: at}
						<-gate
						ev, _, err := db.RecordEvent(ctx, workflow.Event{ID: "evt_" + id, Name: "signed_up", UserID: user, Data: json.RawMessage(`{}`), CreatedAt: at},
							[]workflow.Run{run}, map[string]time.Duration{"onboard": time.Hour}, nil)
						if err != nil {
							t.Errorf("RecordEvent: %v", err)
							return
						}
						mu.Lock()
						started[user] += len(ev.RunsStarted)
						mu.Unlock()
					})
				}
				close(gate)
				wg.Wait()
			}
			for u := range 10 {
				if user := fmt.Sprintf("u%d", u); started[user] != 1 {
					t.Errorf("20 concurrent events of %s started %d runs, want 1", user, started[user])
				}
			}
		})
	}
}
