package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
)

// registerStats adds GET /v1/stats, the dashboard's view of the metrics,
// and GET /v1/stats/links, the most clicked links.
func (s *Server) registerStats() {
	s.Handle("GET /v1/stats", auth.ScopeAdmin, s.stats)
	s.Handle("GET /v1/stats/links", auth.ScopeLinksWrite, s.topLinks)
}

// topLinks answers the caller's most clicked links (every link for admins).
func (s *Server) topLinks(w http.ResponseWriter, r *http.Request) error {
	ls, err := s.linkStats()
	if err != nil {
		return err
	}
	limit := 10
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return fieldErrors(apperr.Invalid, "limit", "must be an integer from 1 to 100")
		}
		limit = n
	}
	links, err := ls.TopLinks(r.Context(), linkCaller(r), domainFilter(r), limit)
	if err != nil {
		return err
	}
	writeItems(w, links, s.toLinkResponse)
	return nil
}

// statsSample is one series of a metric at one instant.
type statsSample struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

// statsExcluded are metric families the dashboard has no use for: the Go
// runtime's and the process's, and per-route HTTP latency buckets.
var statsExcluded = []string{"sluice_go_", "sluice_process_"}

// stats answers GET /v1/stats: the node's sluice_* counters and gauges
// (histograms as _count and _sum) as JSON, so the dashboard can draw rates
// from the differences between two polls without parsing the Prometheus
// text format. Counters are this node's since it started, as in /metrics.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) error {
	families, err := s.opts.Registry.Gather()
	if err != nil && len(families) == 0 {
		return err
	}
	out := []statsSample{}
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "sluice_") || hasAnyPrefix(name, statsExcluded) {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := labelMap(m.GetLabel())
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out = append(out, statsSample{name, labels, m.GetCounter().GetValue()})
			case dto.MetricType_GAUGE:
				out = append(out, statsSample{name, labels, m.GetGauge().GetValue()})
			case dto.MetricType_UNTYPED:
				out = append(out, statsSample{name, labels, m.GetUntyped().GetValue()})
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out = append(out, statsSample{name + "_count", labels, float64(h.GetSampleCount())},
					statsSample{name + "_sum", labels, h.GetSampleSum()})
			}
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{"time": s.opts.Now().UTC().Format(time.RFC3339Nano), "samples": out})
	return nil
}

func labelMap(pairs []*dto.LabelPair) map[string]string {
	if len(pairs) == 0 {
		return nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		m[p.GetName()] = p.GetValue()
	}
	return m
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
