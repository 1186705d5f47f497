package apperr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/synctest"
	"time"
)

func TestMarkTransient(t *testing.T) {
	t.Parallel()
	err := Wrap(Unavailable, MarkTransient(fmt.Errorf("dial: %w", io.ErrUnexpectedEOF)), "database unavailable")
	if !IsTransient(err) || !errors.Is(err, io.ErrUnexpectedEOF) || CodeOf(err) != Unavailable {
		t.Errorf("marked error: transient %v, keeps cause %v, code %q", IsTransient(err), errors.Is(err, io.ErrUnexpectedEOF), CodeOf(err))
	}
	if got := MarkTransient(io.EOF).Error(); got != "EOF" {
		t.Errorf("MarkTransient(io.EOF).Error() = %q, want the cause's text", got)
	}
	if IsTransient(Wrap(Unavailable, io.EOF, "down")) {
		t.Error("an Unavailable error without the mark is transient")
	}
	if MarkTransient(nil) != nil {
		t.Error("MarkTransient(nil) is not nil")
	}
}

func TestRetryTransient(t *testing.T) {
	t.Parallel()
	transient := MarkTransient(errors.New("connection refused"))
	tests := []struct {
		name     string
		window   time.Duration // deadline, from the start
		ctxLimit time.Duration // ctx's own deadline; 0: none
		ctxRetry time.Duration // ctx's retry deadline (WithRetryDeadline); 0: none
		failures int           // transient failures before fn succeeds; -1: always
		final    error         // what fn returns after failures (nil: success)
		want     error
		calls    int
		took     time.Duration
	}{
		{name: "success at once", window: time.Second, failures: 0, calls: 1},
		{name: "succeeds within the window", window: time.Second, failures: 3, calls: 4,
			took: 50*time.Millisecond + 100*time.Millisecond + 200*time.Millisecond},
		{name: "other errors are not retried", window: time.Second, failures: 2, final: io.EOF, want: io.EOF, calls: 3,
			took: 150 * time.Millisecond},
		// Pauses 50, 100, 200, 400, 500, 500, 500, 500, 500: 3250 ms; the
		// next would end at 3750, then 4250 > 4 s.
		{name: "gives up at the window", window: RetryWindow, failures: -1, want: transient, calls: 11,
			took: 3750 * time.Millisecond},
		{name: "gives up at ctx's deadline", window: RetryWindow, ctxLimit: time.Second, failures: -1, want: transient, calls: 5,
			took: 750 * time.Millisecond},
		{name: "gives up at ctx's retry deadline", window: RetryWindow, ctxRetry: time.Second, failures: -1, want: transient, calls: 5,
			took: 750 * time.Millisecond},
		{name: "a later retry deadline changes nothing", window: time.Second, ctxRetry: time.Minute, failures: -1, want: transient, calls: 5,
			took: 750 * time.Millisecond},
		{name: "no window, no retry", window: 0, failures: -1, want: transient, calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ctx := t.Context()
				if tt.ctxLimit > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.ctxLimit)
					defer cancel()
				}
				start := time.Now()
				if tt.ctxRetry > 0 {
					ctx = WithRetryDeadline(ctx, start.Add(tt.ctxRetry))
				}
				calls := 0
				err := RetryTransient(ctx, start.Add(tt.window), func() error {
					calls++
					if tt.failures < 0 || calls <= tt.failures {
						return transient
					}
					return tt.final
				})
				if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
					t.Errorf("RetryTransient = %v, want %v", err, tt.want)
				}
				if calls != tt.calls {
					t.Errorf("fn called %d times, want %d", calls, tt.calls)
				}
				if took := time.Since(start); took != tt.took {
					t.Errorf("took %v, want %v", took, tt.took)
				}
			})
		})
	}
}

func TestRetryTransientStopsWhenCtxIsDone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		transient := MarkTransient(errors.New("connection reset"))
		calls := 0
		err := RetryTransient(ctx, time.Now().Add(RetryWindow), func() error {
			calls++
			if calls == 2 {
				cancel() // the client went away during the second attempt
			}
			return transient
		})
		if !errors.Is(err, transient) || calls != 2 {
			t.Errorf("RetryTransient = %v after %d calls, want the transient error after 2", err, calls)
		}
	})
}

func TestWithRetryDeadlineKeepsTheEarlier(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx := WithRetryDeadline(t.Context(), start.Add(time.Second))
		ctx = WithRetryDeadline(ctx, start.Add(time.Hour)) // later: ignored
		calls := 0
		_ = RetryTransient(ctx, start.Add(RetryWindow), func() error { calls++; return MarkTransient(io.EOF) })
		if took := time.Since(start); took != 750*time.Millisecond || calls != 5 {
			t.Errorf("RetryTransient under retry deadlines of 1 s then 1 h: %d calls in %v, want 5 in 750ms (the earlier wins)", calls, took)
		}
	})
}
