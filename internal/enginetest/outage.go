package enginetest

import (
	"testing"
	"time"
)

// AcrossOutage stops p, calls call on a goroutine of its own, starts p
// again after outage and returns call's answer. It fails t if call
// answers while p is down (it was to wait for p to come back), or has
// not answered 30 s after p started again.
func AcrossOutage[T any](t testing.TB, p *Process, outage time.Duration, what string, call func() T) T {
	t.Helper()
	p.Stop()
	res := make(chan T, 1)
	go func() { res <- call() }()
	select {
	case r := <-res:
		p.Start()
		t.Fatalf("%s answered while %s was down (%+v); want it to wait for the restart", what, p.spec.name, r)
	case <-time.After(outage):
	}
	p.Start()
	select {
	case r := <-res:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not answer 30 s after %s came back", what, p.spec.name)
	}
	panic("unreachable")
}
