package ratelimit_test

import (
	"context"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func TestWait(t *testing.T) {
	t.Parallel()
	policy := ratelimit.Policy{Name: "pace", Algorithm: ratelimit.TokenBucket, Limit: 1, Period: time.Second, Burst: 1}
	t.Run("waits for its turn", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l, _ := ratelimit.NewPolicyLimiter(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), policy)
			start := time.Now()
			for range 3 {
				if err := l.Wait(t.Context(), "k", 1); err != nil {
					t.Fatal(err)
				}
			}
			if got := time.Since(start); got != 2*time.Second {
				t.Errorf("three Waits at 1/s took %v, want 2s", got)
			}
		})
	})
	t.Run("refuses a wait beyond the deadline", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l, _ := ratelimit.NewPolicyLimiter(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), policy)
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			_ = l.Wait(ctx, "k", 1)
			if err := l.Wait(ctx, "k", 1); !errors.Is(err, ratelimit.ErrWaitExceedsDeadline) {
				t.Errorf("Wait = %v, want ErrWaitExceedsDeadline", err)
			}
		})
	})
	t.Run("cancel gives the capacity back", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			l, _ := ratelimit.NewPolicyLimiter(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), policy)
			_ = l.Wait(t.Context(), "k", 1)
			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error)
			go func() { errc <- l.Wait(ctx, "k", 1) }()
			synctest.Wait()
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled Wait = %v, want context.Canceled", err)
			}
			r, _ := l.Reserve(t.Context(), "k", 1, time.Minute)
			if r.Delay != time.Second {
				t.Errorf("Reserve after a cancelled Wait: delay %v, want 1s (the cancelled one returned its token)", r.Delay)
			}
		})
	})
}

func TestNewPolicyLimiterValidates(t *testing.T) {
	t.Parallel()
	_, err := ratelimit.NewPolicyLimiter(ratelimit.NewMemoryStore(ratelimit.MemoryOptions{}), ratelimit.Policy{Name: "bad"})
	if !errors.Is(err, ratelimit.ErrInvalidPolicy) {
		t.Errorf("NewPolicyLimiter(invalid) = %v, want ErrInvalidPolicy", err)
	}
}

// Every package under ratelimit has a doc comment.
func TestPackageDocs(t *testing.T) {
	t.Parallel()
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || strings.HasPrefix(d.Name(), "testdata") {
			return err
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil {
			return err
		}
		documented := map[string]bool{} // by package name
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				return err
			}
			documented[f.Name.Name] = documented[f.Name.Name] || f.Doc != nil
		}
		for name, ok := range documented {
			if !ok {
				t.Errorf("package %s (%s) has no doc comment", name, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
