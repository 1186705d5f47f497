package queue

import (
	"testing"
	"time"
)

func TestPriorityGate(t *testing.T) {
	g := newPriorityGate(2)
	stop := make(chan struct{})
	entered := func() chan func() {
		ch := make(chan func(), 1)
		go func() { ch <- g.enter(stop) }()
		return ch
	}
	wait := func(ch chan func(), what string) func() {
		t.Helper()
		select {
		case release := <-ch:
			return release
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still waiting at the gate", what)
			return nil
		}
	}
	blocked := func(ch chan func(), what string) {
		t.Helper()
		select {
		case <-ch:
			t.Fatalf("%s: went through the gate", what)
		case <-time.After(50 * time.Millisecond):
		}
	}

	// No critical job held: every job starts, without a slot.
	for i := range 5 {
		wait(entered(), "job "+string(rune('a'+i)))()
	}

	// A critical job held: two slots, the third waits for one.
	g.hold(1)
	r1 := wait(entered(), "first slot")
	r2 := wait(entered(), "second slot")
	third := entered()
	blocked(third, "third job while two run")
	r1()
	r3 := wait(third, "third job after a slot was freed")

	// The critical job done: everyone waiting goes at once.
	fourth, fifth := entered(), entered()
	blocked(fourth, "fourth job")
	g.hold(1) // a second critical job, then both done
	g.hold(-1)
	blocked(fifth, "fifth job while a critical job is held")
	g.hold(-1)
	wait(fourth, "fourth job once no critical job is held")()
	wait(fifth, "fifth job once no critical job is held")()
	r2()
	r3()

	// Shutting down frees a waiting job.
	g.hold(1)
	wait(entered(), "slot")
	wait(entered(), "slot")
	sixth := entered()
	blocked(sixth, "sixth job")
	close(stop)
	wait(sixth, "sixth job after stop")
}
