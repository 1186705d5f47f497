package rlqs

import (
	"testing"
	"time"
)

// TestShareCache pins when a division serves a report: fresh (younger
// than a tenth of the interval), for the same limit, holding the client,
// made with the client's demand as it still is (within 5%).
func TestShareCache(t *testing.T) {
	var c shareCache
	t0 := time.Unix(1_800_000_000, 0)
	const iv = 10 * time.Second
	table := []Demand{{Client: "a", Rate: 60}, {Client: "b", Rate: 6}}
	c.store("k", 100, map[string]float64{"a": 90, "b": 10}, table, t0)
	for _, tc := range []struct {
		name      string
		client    string
		limit     float64
		rate      float64
		at        time.Time
		want      float64
		wantReuse bool
	}{
		{"the same demand, at once", "b", 100, 6, t0, 10, true},
		{"within a tenth of the interval", "a", 100, 61, t0.Add(999 * time.Millisecond), 90, true},
		{"past a tenth of the interval", "a", 100, 60, t0.Add(iv / 10), 0, false},
		{"another limit (the rule changed, or Redis failed)", "a", 50, 60, t0, 0, false},
		{"a client the division lacks", "c", 100, 0, t0, 0, false},
		{"the client's demand moved by more than 5%", "a", 100, 64, t0, 0, false},
		{"a small demand within 5% of it", "b", 100, 6.2, t0, 10, true},
		{"a demand under 1 within 0.05 of it", "c0", 100, 0, t0, 0, false},
		{"a clock that went back", "a", 100, 60, t0.Add(-time.Second), 0, false},
	} {
		got, ok := c.lookup("k", tc.client, tc.limit, tc.rate, iv, tc.at)
		if ok != tc.wantReuse || got != tc.want {
			t.Errorf("%s: lookup = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.wantReuse)
		}
	}
	if _, ok := c.lookup("other", "a", 100, 60, iv, t0); ok {
		t.Error("a bucket never divided: lookup found a division")
	}
	c.forget("k")
	if _, ok := c.lookup("k", "b", 100, 6, iv, t0); ok {
		t.Error("after forget: lookup found the division")
	}
	// Divisions no one reported for a minute are swept at the next store.
	c.store("k", 100, map[string]float64{"a": 100}, table[:1], t0)
	c.store("k2", 100, map[string]float64{"a": 100}, table[:1], t0.Add(2*time.Minute))
	if _, kept := c.m["k"]; kept || len(c.m) != 1 {
		t.Errorf("divisions after the sweep: %v, want only k2", c.m)
	}
}
