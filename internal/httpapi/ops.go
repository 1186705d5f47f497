package httpapi

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicehq/sluice/internal/auth"
)

func (s *Server) registerOps() {
	s.mux.HandleFunc("/", s.notRouted) // not in Routes: it is the 404/405 fallback
	s.Handle("GET /healthz", public, func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.opts.Version})
		return nil
	})
	s.Handle("GET /readyz", public, s.readyz)
	metrics := promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{ErrorLog: nil})
	metricsScope := public
	if s.opts.MetricsAuth {
		metricsScope = anyScope
	}
	s.Handle("GET /metrics", metricsScope, func(w http.ResponseWriter, r *http.Request) error {
		metrics.ServeHTTP(w, r)
		return nil
	})
	s.Handle("GET /openapi.json", public, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(OpenAPI(s.openAPIServer(r)))
		return err
	})
}

// readyDetails reports whether r may read /readyz's error text and
// details: it carries an admin key or an admin's dashboard session, or it
// is a keyless local client (authorize). An unknown key counts as a failed
// authentication like on any route, but /readyz still answers.
func (s *Server) readyDetails(r *http.Request) bool {
	if s.opts.Keys == nil {
		return false
	}
	_, err := s.auth.authorize(r, auth.ScopeAdmin)
	return err == nil
}

type checkResult struct {
	Name       string  `json:"name"`
	Status     string  `json:"status"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	Detail     any     `json:"detail,omitempty"`
}

// readyz runs every check concurrently and answers 200, or 503 naming each
// failing engine. Engine error text and check details (addresses, driver
// messages, provider states) go only to callers readyDetails admits;
// others get the same status with each engine's name and state.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	results := make([]checkResult, len(s.opts.Checks))
	var wg sync.WaitGroup
	for i, c := range s.opts.Checks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), s.opts.ReadyTimeout)
			defer cancel()
			start := time.Now()
			err := c.Ping(ctx)
			res := checkResult{Name: c.Name, Status: "ok", DurationMS: float64(time.Since(start).Microseconds()) / 1000}
			if err != nil {
				res.Status, res.Error = "failing", err.Error()
			}
			if c.Detail != nil {
				res.Detail = c.Detail()
			}
			results[i] = res
		})
	}
	wg.Wait()
	if !s.readyDetails(r) {
		for i := range results {
			results[i].Error, results[i].Detail = "", nil
		}
	}
	var failing []string
	for _, res := range results {
		if res.Status != "ok" {
			failing = append(failing, fmt.Sprintf("%s: %s", res.Name, cmp.Or(res.Error, res.Status)))
		}
	}
	if len(failing) > 0 {
		p := NewProblem(http.StatusServiceUnavailable, "not-ready", "", "not ready: "+strings.Join(failing, "; "))
		p.Ext = map[string]any{"checks": results}
		w.Header().Set("Retry-After", "1")
		WriteProblem(w, r, p)
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": results})
	return nil
}
