package httpapi

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func (s *Server) registerOps() {
	s.mux.HandleFunc("/", s.notRouted) // not in Routes: it is the 404/405 fallback
	s.Handle("GET /healthz", public, func(w http.ResponseWriter, r *http.Request) error {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.opts.Version})
		return nil
	})
	s.Handle("GET /readyz", public, s.readyz)
	metrics := promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{ErrorLog: nil})
	s.Handle("GET /metrics", public, func(w http.ResponseWriter, r *http.Request) error {
		metrics.ServeHTTP(w, r)
		return nil
	})
	s.Handle("GET /openapi.json", public, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		_, err := w.Write(OpenAPI(s.openAPIServer(r)))
		return err
	})
}

type checkResult struct {
	Name       string  `json:"name"`
	Status     string  `json:"status"`
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	Detail     any     `json:"detail,omitempty"`
}

// readyz runs every check concurrently and answers 200, or 503 naming each
// failing engine.
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
	var failing []string
	for _, res := range results {
		if res.Status != "ok" {
			failing = append(failing, fmt.Sprintf("%s: %s", res.Name, res.Error))
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
