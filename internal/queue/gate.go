package queue

import "sync"

// priorityGate puts critical jobs first on a node. While the node holds a
// critical job (waiting for a worker or running), the workers of the other
// categories start at most limit new jobs at once between them; the jobs
// they were running go on. Without it, a node draining a campaign gives
// an OTP's goroutines the same CPU share as each of its hundred marketing
// workers, and under CPU contention (a busy host, a small container) the
// OTP waited seconds behind them. With it, the OTP takes the CPU the
// campaign leaves, and the campaign never stops: limit jobs keep running,
// and every worker starts again once no critical job is held.
type priorityGate struct {
	mu     sync.Mutex
	urgent int           // critical jobs held
	clear  chan struct{} // closed while urgent == 0
	slots  chan struct{} // other jobs started while urgent > 0, at most cap
}

func newPriorityGate(limit int) *priorityGate {
	clear := make(chan struct{})
	close(clear)
	return &priorityGate{clear: clear, slots: make(chan struct{}, max(1, limit))}
}

// hold counts a critical job held (d = 1) or done with (d = -1).
func (g *priorityGate) hold(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	prev := g.urgent
	g.urgent += d
	switch {
	case prev == 0 && g.urgent > 0:
		g.clear = make(chan struct{})
	case prev > 0 && g.urgent == 0:
		close(g.clear)
	}
}

// enter waits until a job of another category may start: at once while no
// critical job is held, else for one of the limited slots, or until no
// critical job is held or stop is closed. Call the returned release when
// the job is over.
func (g *priorityGate) enter(stop <-chan struct{}) (release func()) {
	g.mu.Lock()
	urgent, clear := g.urgent, g.clear
	g.mu.Unlock()
	if urgent == 0 {
		return func() {}
	}
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }
	case <-clear:
	case <-stop:
	}
	return func() {}
}
