package panics

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// counted is a Reporter whose log and counts the test reads.
type counted struct {
	mu     sync.Mutex
	counts map[string]int
	log    bytes.Buffer
}

func newCounted() (*counted, *Reporter) {
	c := &counted{counts: map[string]int{}}
	return c, &Reporter{
		Logger: slog.New(slog.NewTextHandler(syncWriter{c}, nil)),
		Count:  func(s string) { c.mu.Lock(); c.counts[s]++; c.mu.Unlock() },
	}
}

type syncWriter struct{ c *counted }

func (w syncWriter) Write(b []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	return w.c.log.Write(b)
}

func (c *counted) count(s string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.counts[s] }
func (c *counted) logged() string     { c.mu.Lock(); defer c.mu.Unlock(); return c.log.String() }

func boom() { panic("boom") }

func TestDoRecovers(t *testing.T) {
	t.Parallel()
	c, r := newCounted()
	err := r.Do(context.Background(), Worker, func() error { boom(); return nil }, slog.String("job", "j1"))
	if !errors.Is(err, ErrRecovered) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Do(panicking) = %v, want ErrRecovered with the value", err)
	}
	if got := c.count(Worker); got != 1 {
		t.Errorf("count(worker) = %d, want 1", got)
	}
	log := c.logged()
	if strings.Count(log, "panic recovered") != 1 || !strings.Contains(log, "job=j1") || !strings.Contains(log, "panics.boom") {
		t.Errorf("log = %q, want one record with the attrs and the stack down to boom", log)
	}
	want := errors.New("plain")
	if err := r.Do(context.Background(), Worker, func() error { return want }); err != want {
		t.Errorf("Do(failing) = %v, want its error as it is", err)
	}
	if got := c.count(Worker); got != 1 {
		t.Errorf("count(worker) = %d after an error, want still 1", got)
	}
}

func TestNilReporter(t *testing.T) {
	t.Parallel()
	var r *Reporter
	err := r.Do(context.Background(), Worker, func() error { panic(nil) })
	if !errors.Is(err, ErrRecovered) {
		t.Fatalf("nil Reporter Do(panic(nil)) = %v, want ErrRecovered", err)
	}
}

func TestFunc(t *testing.T) {
	t.Parallel()
	c, r := newCounted()
	var got []string
	f := Func(r, Announce, func(s string) {
		if s == "bad" {
			boom()
		}
		got = append(got, s)
	})
	for _, s := range []string{"a", "bad", "b"} {
		f(s)
	}
	if strings.Join(got, ",") != "a,b" || c.count(Announce) != 1 {
		t.Errorf("handled %v, counted %d; want a,b and 1", got, c.count(Announce))
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	fail := func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "internal", http.StatusInternalServerError)
	}
	tests := []struct {
		name      string
		h         http.HandlerFunc
		wantCode  int
		wantPanic any // what reaches the server
		counted   int
	}{
		{"before writing", func(http.ResponseWriter, *http.Request) { boom() }, 500, nil, 1},
		{"after writing", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(202); boom() }, 202, http.ErrAbortHandler, 1},
		{"after flushing", func(w http.ResponseWriter, _ *http.Request) { w.(http.Flusher).Flush(); boom() }, 200, http.ErrAbortHandler, 1},
		{"abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }, 200, http.ErrAbortHandler, 0},
		{"no panic", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }, 204, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, r := newCounted()
			rec := httptest.NewRecorder()
			var reached any
			func() {
				defer func() { reached = recover() }()
				r.Handler(Gateway, tt.h, fail).ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
			}()
			if reached != tt.wantPanic {
				t.Errorf("panic reaching the server = %v, want %v", reached, tt.wantPanic)
			}
			if rec.Code != tt.wantCode {
				t.Errorf("status = %d, want %d", rec.Code, tt.wantCode)
			}
			if got := c.count(Gateway); got != tt.counted {
				t.Errorf("count(gateway) = %d, want %d", got, tt.counted)
			}
		})
	}
}
