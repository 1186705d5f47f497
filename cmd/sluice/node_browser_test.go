package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium driven over the DevTools protocol, which
// records every console error, uncaught exception and browser-side error
// (a CSP violation, say) so a test can require a page to load cleanly.
type browser struct {
	ctx       context.Context
	artifacts string

	mu     sync.Mutex
	errors []string
}

// chromiumPath finds Debian's chromium (or $SLUICE_CHROMIUM). Without one
// the browser tests skip, except under CI=true, where they fail: CI
// installs chromium (.ci/run), so a missing browser is a broken setup.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install -y chromium); CI=true requires the browser tests to run")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); skipping the browser tests")
	return ""
}

// artifactsDir is where screenshots go: $SLUICE_ARTIFACTS, else a new
// temporary directory that outlives the test, named in the test log.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SLUICE_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "sluice-ui-screenshots-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}

// newBrowser starts chromium with the flags that work as root in a
// container without a display, GPU or network, and a fresh profile.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	exe := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{ctx: ctx, artifacts: artifactsDir(t)}
	// The first call starts the browser; it must not carry a deadline.
	err := chromedp.Listen(ctx, b.onEvent)
	if err == nil {
		_, err = chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
	}
	if err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	return b
}

func (b *browser) onEvent(ev any) {
	var msg string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = "exception: " + e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type != runtime.ConsoleAPICalledTypeError && e.Type != runtime.ConsoleAPICalledTypeAssert {
			return
		}
		var parts []string
		for _, a := range e.Args {
			parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
		}
		msg = "console." + string(e.Type) + ": " + strings.Join(parts, " ")
	case *cdplog.EventEntryAdded:
		// Network entries are HTTP errors the page handled and showed
		// (a 422 from a refused change, say); the rest (security: CSP
		// violations, javascript, rendering) are faults.
		if e.Entry.Level != cdplog.EntryLevelError || e.Entry.Source == cdplog.EntrySourceNetwork {
			return
		}
		msg = fmt.Sprintf("log %s: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
	default:
		return
	}
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

// run runs actions with a deadline and fails the test on error.
func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.screenshot(t, "failed-"+what)
		t.Fatalf("%s: %v", what, err)
	}
}

// screenshot saves the whole page as name.png in the artifacts dir.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG, not JPEG
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.artifacts, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("write %s: %v", path, err)
	}
}

// noErrors fails the test if the page reported errors since the last call.
func (b *browser) noErrors(t *testing.T, page string) {
	t.Helper()
	b.mu.Lock()
	errs := b.errors
	b.errors = nil
	b.mu.Unlock()
	for _, e := range errs {
		t.Errorf("%s: %s", page, e)
	}
}

// waitText waits until the element matching sel contains text.
func waitText(sel, text string) chromedp.Action[chromedp.Void] {
	return waitJS(fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.textContent.includes(%q); })()`, sel, text))
}

// waitJS waits until the expression is truthy.
func waitJS(expr string) chromedp.Action[chromedp.Void] {
	poll := chromedp.Poll[bool](expr, chromedp.WithPollingInterval(100*time.Millisecond))
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := poll(ctx, t)
		return err
	})
}

// eval runs a statement in the page.
func eval(js string) chromedp.Action[chromedp.Void] { return chromedp.Evaluate[chromedp.Void](js) }

// evalBool evaluates a boolean expression in the page once.
func (b *browser) evalBool(t *testing.T, expr string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}
