package ratelimit_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// scenario is a policy shape and an arrival sequence decoded from bytes, so
// the property tests and the fuzz targets share one generator.
type scenario struct {
	limit, burst int64
	period       time.Duration
	reqs         []ratelimit.SimRequest
}

func decodeScenario(data []byte) scenario {
	next := func() uint64 {
		if len(data) == 0 {
			return 0
		}
		var b [8]byte
		n := copy(b[:], data)
		data = data[n:]
		return binary.LittleEndian.Uint64(b[:])
	}
	h := next()
	s := scenario{
		limit:  int64(h%9) + 1,
		burst:  int64(h>>8%9) + 1,
		period: time.Duration(h>>16%5000+1) * time.Millisecond,
	}
	var at time.Duration
	for len(data) > 0 && len(s.reqs) < 64 {
		v := next()
		// Gaps from 0 to about two periods, some of them exact multiples
		// of the period to probe the half-open edges.
		switch v % 4 {
		case 0:
		case 1:
			at += s.period
		default:
			at += time.Duration(v>>8%uint64(2*s.period/time.Microsecond)) * time.Microsecond
		}
		s.reqs = append(s.reqs, ratelimit.SimRequest{At: at, Key: "k", Cost: int64(v>>40%3) + 1})
	}
	return s
}

func (s scenario) policy(alg ratelimit.Algorithm) ratelimit.Policy {
	p := ratelimit.Policy{Name: "p", Algorithm: alg, Limit: s.limit, Period: s.period}
	if alg == ratelimit.TokenBucket || alg == ratelimit.GCRA {
		p.Burst = s.burst
	}
	return p
}

// simulate runs s under alg, skipping costs the policy can never admit.
func (s scenario) simulate(t *testing.T, alg ratelimit.Algorithm) (ratelimit.Policy, []ratelimit.SimRequest, []ratelimit.Decision) {
	t.Helper()
	p := s.policy(alg)
	var reqs []ratelimit.SimRequest
	for _, r := range s.reqs {
		if r.Cost <= p.MaxCost() {
			reqs = append(reqs, r)
		}
	}
	ds, err := ratelimit.Simulate(p, reqs)
	if err != nil {
		t.Fatalf("Simulate(%+v): %v", p, err)
	}
	return p, reqs, ds
}

// checkScenario asserts every property on one scenario.
func checkScenario(t *testing.T, s scenario) {
	t.Helper()
	// Exact windows: no half-open window of one period ever holds more
	// than Limit; fixed windows hold at most Limit per aligned window.
	for _, alg := range []ratelimit.Algorithm{ratelimit.SlidingWindowLog, ratelimit.Concurrency, ratelimit.FixedWindow} {
		p, reqs, ds := s.simulate(t, alg)
		for i := range reqs {
			var sum int64
			for j := range reqs[:i+1] {
				inWindow := reqs[j].At > reqs[i].At-p.Period
				if alg == ratelimit.FixedWindow {
					inWindow = reqs[j].At/p.Period == reqs[i].At/p.Period
				}
				if ds[j].Allowed && inWindow {
					sum += reqs[j].Cost
				}
			}
			if sum > p.Limit {
				t.Fatalf("%s %+v admitted %d in one window ending at request %d, limit %d", alg, p, sum, i, p.Limit)
			}
		}
	}
	// The buckets: over any interval of length d, at most
	// Burst + d × Limit/Period.
	pb, reqs, tb := s.simulate(t, ratelimit.TokenBucket)
	for i := range reqs {
		var sum int64
		for j := i; j < len(reqs); j++ {
			if tb[j].Allowed {
				sum += reqs[j].Cost
			}
			d := reqs[j].At - reqs[i].At
			if float64(sum) > float64(pb.Burst)+float64(d)*float64(pb.Limit)/float64(pb.Period)+1e-9 {
				t.Fatalf("token bucket %+v admitted %d between requests %d and %d", pb, sum, i, j)
			}
		}
	}
	// GCRA and the token bucket admit the same sequences (and report the
	// same decisions) for the same rate and burst.
	if _, _, g := s.simulate(t, ratelimit.GCRA); len(g) == len(tb) {
		for i := range g {
			if g[i] != tb[i] {
				t.Fatalf("request %d (%+v): gcra %+v, token bucket %+v", i, reqs[i], g[i], tb[i])
			}
		}
	}
	// RetryAfter is exact: with nothing else arriving, the refused request
	// passes after RetryAfter and not a microsecond sooner. Remaining never
	// leaves [0, Limit].
	for _, alg := range ratelimit.Algorithms() {
		p, reqs, ds := s.simulate(t, alg)
		for i, d := range ds {
			if d.Remaining < 0 || d.Remaining > d.Limit {
				t.Fatalf("%s request %d: Remaining %d outside [0, %d]", alg, i, d.Remaining, d.Limit)
			}
			if d.Allowed != (d.RetryAfter == 0) {
				t.Fatalf("%s request %d: %+v: RetryAfter must be zero exactly when allowed", alg, i, d)
			}
			if d.Allowed || i > 24 {
				continue
			}
			retry := func(at time.Duration) bool {
				replay := append(append([]ratelimit.SimRequest(nil), reqs[:i]...), ratelimit.SimRequest{At: at, Key: "k", Cost: reqs[i].Cost})
				got, err := ratelimit.Simulate(p, replay)
				if err != nil {
					t.Fatal(err)
				}
				return got[len(got)-1].Allowed
			}
			if !retry(reqs[i].At + d.RetryAfter) {
				t.Fatalf("%s %+v request %d (%+v): refused with RetryAfter %v, still refused then", alg, p, i, reqs[i], d.RetryAfter)
			}
			if retry(reqs[i].At + d.RetryAfter - time.Microsecond) {
				t.Fatalf("%s %+v request %d (%+v): RetryAfter %v, but allowed 1µs sooner", alg, p, i, reqs[i], d.RetryAfter)
			}
		}
	}
}

func TestProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		data := make([]byte, 8*(1+r.IntN(64)))
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		s := decodeScenario(data)
		if testing.Verbose() && i == 0 {
			t.Logf("first scenario: %+v", s)
		}
		checkScenario(t, s)
	}
}

func FuzzAlgorithms(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x05\x05\x10\x27\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x01\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("seed lesson: 5 per 10 s, bursts at the boundary, several costs and gaps of all kinds"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScenario(t, decodeScenario(data))
	})
}
