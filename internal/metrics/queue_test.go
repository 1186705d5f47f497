package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/notify"
)

// horizons answers Horizon from a table; queues not in it fail.
type horizons map[notify.Channel]time.Time

func (h horizons) Horizon(_ context.Context, c notify.Channel, _ notify.Category) (time.Time, error) {
	t, ok := h[c]
	if !ok {
		return time.Time{}, errors.New("no such queue")
	}
	return t, nil
}

// TestQueueLag: the gauge is the age of each queue's oldest job, and a
// queue that cannot be asked is left out rather than reported as 0.
func TestQueueLag(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	l := NewQueueLag(horizons{notify.Email: now.Add(-90 * time.Second), notify.SMS: now})
	l.now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(l)
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 {
		t.Fatalf("Gather = %d families, %v", len(mfs), err)
	}
	got := map[string]float64{}
	for _, m := range mfs[0].GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		got[labels["channel"]+"/"+labels["category"]] = m.GetGauge().GetValue()
	}
	want := map[string]float64{"email/critical": 90, "email/orders": 90, "email/marketing": 90,
		"sms/critical": 0, "sms/orders": 0, "sms/marketing": 0}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v (push and webhook cannot be asked: left out)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
