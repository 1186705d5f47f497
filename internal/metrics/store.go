package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CommitStats are the record store's group commit counters; a
// *store.BatchStats is one. Its methods must be safe for concurrent use:
// they are read at scrape time.
type CommitStats interface {
	// Snapshot returns the transactions committed, the writes they
	// carried and the largest batch.
	Snapshot() (batches, ops int64, largest int)
	// BusyTime returns the writers' time spent running and committing
	// transactions.
	BusyTime() time.Duration
}

// RegisterStore registers on reg the group commit series read from st:
// writes per commit and how busy the writer is say whether the database is
// what limits the notification pipeline.
func RegisterStore(reg prometheus.Registerer, st CommitStats) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_store_commits_total",
			Help: "Group-committed transactions."},
			func() float64 { b, _, _ := st.Snapshot(); return float64(b) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_store_committed_writes_total",
			Help: "Writes (one caller's rows each) carried by group-committed transactions."},
			func() float64 { _, o, _ := st.Snapshot(); return float64(o) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_store_commit_busy_seconds_total",
			Help: "Time the group commit writers spent running and committing transactions."},
			func() float64 { return st.BusyTime().Seconds() }),
	)
}
