package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/sluicehq/sluice/ratelimit"
)

// FuzzMeter feeds arbitrary response bodies, in two writes, through the
// meter that finds a JSON cost: it must never panic, and it passes the
// body through unchanged.
func FuzzMeter(f *testing.F) {
	f.Add("text/event-stream", []byte("data: {\"usage\":{\"total_tokens\":7}}\n\ndata: [DONE]\n\n"), 5)
	f.Add("application/json", []byte(`{"usage":{"total_tokens":7.5}}`), 3)
	f.Add("text/event-stream", []byte("data: {\"usage\":\r\ndata: {\"total_tokens\":1}}\r\n\r\n"), 0)
	f.Fuzz(func(t *testing.T, ct string, body []byte, cut int) {
		rec := httptest.NewRecorder()
		m := &meter{ResponseWriter: rec, field: "usage.total_tokens"}
		m.Header().Set("Content-Type", ct)
		cut = min(max(cut, 0), len(body))
		m.WriteHeader(http.StatusOK)
		_, _ = m.Write(body[:cut])
		_, _ = m.Write(body[cut:])
		if got := rec.Body.String(); got != string(body) {
			t.Fatalf("body passed through as %q, want %q", got, body)
		}
		if v, st := responseCost(&CostFromResponse{JSON: m.field}, m); st == costFound && (v < 0 || v > ratelimit.MaxUsageCost) {
			t.Fatalf("cost %d, want none or at least 0", v)
		}
	})
}

// meterCost runs body through a fresh meter, with encoding as its
// Content-Encoding, in two writes, and returns what the client got and
// the cost found.
func meterCost(ct, encoding string, body []byte, cut int) (string, int64, costState) {
	rec := httptest.NewRecorder()
	m := &meter{ResponseWriter: rec, field: "usage.total_tokens"}
	m.Header().Set("Content-Type", ct)
	if encoding != "" {
		m.Header().Set("Content-Encoding", encoding)
	}
	cut = min(max(cut, 0), len(body))
	m.WriteHeader(http.StatusOK)
	_, _ = m.Write(body[:cut])
	_, _ = m.Write(body[cut:])
	m.finish()
	v, st := responseCost(&CostFromResponse{JSON: m.field}, m)
	return rec.Body.String(), v, st
}

// FuzzMeterDecoded: a gzipped body meters as the same body plain, the
// client getting the gzipped bytes unchanged; arbitrary bytes labelled
// gzip, deflate, br or zstd never panic the meter nor yield a cost out
// of range.
func FuzzMeterDecoded(f *testing.F) {
	f.Add("text/event-stream", []byte("data: {\"usage\":{\"total_tokens\":7}}\n\ndata: [DONE]\n\n"), 5, uint8(0))
	f.Add("application/json", []byte(`{"usage":{"total_tokens":1e300}}`), 3, uint8(1))
	f.Add("application/json", []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 1, 2}, 4, uint8(2))
	f.Fuzz(func(t *testing.T, ct string, body []byte, cut int, enc uint8) {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		_, _ = zw.Write(body[:min(max(cut, 0), len(body))])
		_ = zw.Flush()
		_, _ = zw.Write(body[min(max(cut, 0), len(body)):])
		_ = zw.Close()
		plainBody, pv, ps := meterCost(ct, "", body, cut)
		gotBody, gv, gs := meterCost(ct, "gzip", z.Bytes(), cut)
		if plainBody != string(body) || gotBody != z.String() {
			t.Fatal("the meter changed the body passed through")
		}
		if pv != gv || ps != gs {
			t.Fatalf("gzipped body metered %d (%v), plain %d (%v)", gv, gs, pv, ps)
		}
		_, v, st := meterCost(ct, []string{"gzip", "deflate", "br", "zstd"}[enc%4], body, cut)
		if st == costFound && (v < 0 || v > ratelimit.MaxUsageCost) {
			t.Fatalf("cost %d out of range", v)
		}
	})
}

// FuzzParseCost: any header value or JSON number parses to no cost or
// one the store takes.
func FuzzParseCost(f *testing.F) {
	for _, s := range []string{"12", "9007199254740992", "1e400", "-0", "NaN", "inf", "0x1p60", "1e-400", "12.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v, st := parseCost(s); st == costFound && (v < 0 || v > ratelimit.MaxUsageCost) {
			t.Fatalf("parseCost(%q) = %d", s, v)
		}
	})
}
