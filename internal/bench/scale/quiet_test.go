package scale_test

import "sync"

// machine lets the engines' fills run side by side (SQLite's in this
// process, PostgreSQL's in its server: a core each) while every
// measurement runs alone: a fill holds it shared for one batch at a time,
// a measurement holds it whole, waiting for the batches under way and
// keeping new ones out. Only the fills overlap, so the curve takes about
// the longer engine's fill plus every measurement, instead of the sum of
// both engines' fills, and no figure is taken beside another engine's
// work.
var machine sync.RWMutex

// filling runs one fill batch.
func filling(fill func() error) error {
	machine.RLock()
	defer machine.RUnlock()
	return fill()
}

// measuring runs a measurement alone on the machine.
func measuring(measure func()) {
	machine.Lock()
	defer machine.Unlock()
	measure()
}
