package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkBodies are single checks spread over 20,000 keys (the active keys
// at peak assumed in docs/benchmarks.md) of the paid tier, so few are
// refused.
func checkBodies() []string {
	out := make([]string, 20_000)
	for i := range out {
		out[i] = `{"policy":"paid","key":"api_key:` + strconv.Itoa(i) + `","cost":1}`
	}
	return out
}

// BenchmarkCheckHandler is POST /v1/ratelimit/check through the whole
// frame (auth, routing, JSON, headers, metrics) in process, memory store.
func BenchmarkCheckHandler(b *testing.B) {
	bd := setupRL(b)
	bodies := checkBodies()
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", "http://localhost/v1/ratelimit/check", strings.NewReader(bodies[n.Add(1)%int64(len(bodies))]))
			req.RemoteAddr = "127.0.0.1:1"
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			bd.srv.ServeHTTP(rec, req)
			if rec.Code != 200 {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	})
}

// loopback drives h over loopback HTTP/1.1 keep-alive connections from 64
// concurrent callers and reports requests/s and the p99 latency.
func loopback(b *testing.B, h http.Handler, body func(i int64) string) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var (
		n   atomic.Int64
		mu  sync.Mutex
		lat []time.Duration
	)
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) // 64 callers
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			resp, err := client.Post(srv.URL+"/v1/ratelimit/check", "application/json", strings.NewReader(body(n.Add(1))))
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}

// BenchmarkCheckLoopback is the decision API over loopback HTTP.
func BenchmarkCheckLoopback(b *testing.B) {
	bd := setupRL(b)
	bodies := checkBodies()
	loopback(b, bd.srv, func(i int64) string { return bodies[i%int64(len(bodies))] })
}

// BenchmarkBareLoopback is a bare net/http handler answering a fixed JSON
// body, the ceiling the decision API is measured against.
func BenchmarkBareLoopback(b *testing.B) {
	reply := []byte(`{"allowed":true,"limit":600,"remaining":599,"retry_after_ms":0,"reset_after_ms":100}` + "\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reply)
	})
	loopback(b, h, func(int64) string { return `{"policy":"paid","key":"api_key:1","cost":1}` })
}
