package metrics

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestHooksComplete: every hook the domain packages offer is bound, so no
// event goes uncounted when a field is added to a hooks struct.
func TestHooksComplete(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for name, hooks := range map[string]any{
		"limits.Metrics":  *NewLimits(reg),
		"shorten.Metrics": *NewLinks(reg),
		"guard.Metrics":   NewProviders(reg).Hooks(),
	} {
		v := reflect.ValueOf(hooks)
		for i := range v.NumField() {
			if v.Field(i).IsNil() {
				t.Errorf("%s.%s is nil, want bound to a series", name, v.Type().Field(i).Name)
			}
		}
	}
}

// TestLinksClickBuffer: the click buffer gauge is registered when the
// service hands its buffer over, and reads it at scrape time.
func TestLinksClickBuffer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := NewLinks(reg)
	pending := 3
	m.ClickBuffer(func() int { return pending })
	pending = 7
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_links_click_buffer" {
			if g := mf.GetMetric()[0].GetGauge().GetValue(); g != 7 {
				t.Errorf("sluice_links_click_buffer = %v, want 7 (read at scrape time)", g)
			}
			return
		}
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	t.Errorf("sluice_links_click_buffer not served; got %s", strings.Join(names, ", "))
}
