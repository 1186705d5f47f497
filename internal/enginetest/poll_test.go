package enginetest

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPollReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	_, err := Poll(5*time.Second, func() error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls.Load() != 3 {
		t.Fatalf("Poll = %v after %d calls, want nil after 3", err, calls.Load())
	}
}

func TestPollReturnsTheLastStateAtTheDeadline(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	_, err := Poll(50*time.Millisecond, func() error {
		calls.Add(1)
		return errors.New("still closed")
	})
	if err == nil || err.Error() != "still closed" {
		t.Fatalf("Poll = %v, want the condition's last error", err)
	}
	if calls.Load() < 2 {
		t.Errorf("Poll called the condition %d times in 50ms, want at least 2", calls.Load())
	}
}

func TestStateFormatsOnlyWhenNotOK(t *testing.T) {
	t.Parallel()
	if err := State(true, "n=%d", 1); err != nil {
		t.Errorf("State(true) = %v, want nil", err)
	}
	if err := State(false, "n=%d", 2); err == nil || err.Error() != "n=2" {
		t.Errorf("State(false) = %v, want n=2", err)
	}
}
