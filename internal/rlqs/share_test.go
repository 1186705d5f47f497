package rlqs

import (
	"fmt"
	"math"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0)

func live(client string, rate float64) Demand {
	return Demand{Client: client, Rate: rate, Expires: t0.Add(time.Minute)}
}

func TestShares(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		limit   float64
		demands []Demand
		want    map[string]float64
	}{
		{"no clients", 100, nil, map[string]float64{}},
		{"one client gets everything", 100, []Demand{live("a", 5)}, map[string]float64{"a": 100}},
		{"idle clients split evenly", 100, []Demand{live("a", 0), live("b", 0)}, map[string]float64{"a": 50, "b": 50}},
		// floor 5 each; rest 90; a wants 5 above its floor, b takes the
		// other 85 (it wants 195); nothing left over.
		{"uneven demand", 100, []Demand{live("a", 10), live("b", 200)}, map[string]float64{"a": 10, "b": 90}},
		// floor 10/3 each; every excess is above an equal part of the rest (30).
		{"all over", 100, []Demand{live("a", 1000), live("b", 1000), live("c", 1000)},
			map[string]float64{"a": 100.0 / 3, "b": 100.0 / 3, "c": 100.0 / 3}},
		// floor 5 each; a wants 15 above, b 25: 40 of 90, 50 left, 25 each.
		{"headroom split evenly", 100, []Demand{live("a", 20), live("b", 30)}, map[string]float64{"a": 45, "b": 55}},
		{"expired client frees its share", 100, []Demand{live("a", 50), {Client: "b", Rate: 50, Expires: t0}},
			map[string]float64{"a": 100}},
		{"duplicate client counted once", 100, []Demand{live("a", 10), live("a", 10)}, map[string]float64{"a": 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Shares(tt.limit, tt.demands, t0, 0)
			if len(got) != len(tt.want) {
				t.Fatalf("Shares = %v, want %v", got, tt.want)
			}
			for c, w := range tt.want {
				if math.Abs(got[c]-w) > 1e-9 {
					t.Errorf("Shares[%s] = %v, want %v (all: %v)", c, got[c], w, got)
				}
			}
		})
	}
}

// TestSharesBounds checks the allocator's promises over many demand
// tables: the sum never passes the limit, every client has the floor,
// and a client's share never falls when its own demand grows.
func TestSharesBounds(t *testing.T) {
	t.Parallel()
	rates := []float64{0, 1, 3, 7, 20, 55, 150, 400, 1e4}
	for _, limit := range []float64{1, 7, 100, 12345} {
		for n := 1; n <= 5; n++ {
			for seed := range 40 {
				ds := make([]Demand, n)
				for i := range ds {
					ds[i] = live(fmt.Sprint("c", i), rates[(seed*7+i*3+i*i*seed)%len(rates)])
				}
				got := Shares(limit, ds, t0, 0)
				sum := 0.0
				for _, s := range got {
					sum += s
					if s < limit*DefaultMinFraction/float64(n)-1e-9 {
						t.Fatalf("limit %v, demands %v: share %v under the floor", limit, ds, s)
					}
				}
				if sum > limit*(1+1e-12) {
					t.Fatalf("limit %v, demands %v: shares sum to %v", limit, ds, sum)
				}
				more := append([]Demand(nil), ds...)
				more[0].Rate = more[0].Rate*2 + 10
				if after := Shares(limit, more, t0, 0)["c0"]; after < got["c0"]-1e-9 {
					t.Fatalf("limit %v, demands %v: c0's share fell from %v to %v as its demand grew", limit, ds, got["c0"], after)
				}
			}
		}
	}
}

func TestSharesNewClient(t *testing.T) {
	t.Parallel()
	before := Shares(100, []Demand{live("a", 500)}, t0, 0)
	after := Shares(100, []Demand{live("a", 500), live("new", 0)}, t0, 0)
	if before["a"] != 100 {
		t.Fatalf("alone, a = %v, want 100", before["a"])
	}
	if after["new"] < 5 || after["a"] > 95 {
		t.Errorf("after a new client: %v, want new ≥ 5 (its floor) and a ≤ 95", after)
	}
}
