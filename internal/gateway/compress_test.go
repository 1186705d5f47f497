package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/klauspost/compress/zstd"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/gateway"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// flushWriter is a compressor that can end what it has so far.
type flushWriter interface {
	io.WriteCloser
	Flush() error
}

// compressor returns enc's encoder onto w.
func compressor(enc string, w io.Writer) flushWriter {
	switch enc {
	case "gzip":
		return gzip.NewWriter(w)
	case "deflate":
		return zlib.NewWriter(w)
	case "br":
		return brotli.NewWriter(w)
	case "zstd":
		z, _ := zstd.NewWriter(w)
		return z
	}
	panic("no encoder " + enc)
}

// decompress decodes body, as the client would.
func decompress(enc string, body []byte) (string, error) {
	var r io.Reader
	var err error
	switch enc {
	case "gzip":
		r, err = gzip.NewReader(bytes.NewReader(body))
	case "deflate":
		r, err = zlib.NewReader(bytes.NewReader(body))
	case "br":
		r = brotli.NewReader(bytes.NewReader(body))
	case "zstd":
		r, err = zstd.NewReader(bytes.NewReader(body))
	}
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(r)
	return string(b), err
}

// usageBody is what compressingLLM sends for path, before compressing.
func usageBody(path string, tokens int) string {
	if path == "/sse" {
		return "data: {\"choices\":[{\"delta\":\"hi\"}]}\n\n" +
			fmt.Sprintf("data: {\"choices\":[],\"usage\":{\"total_tokens\":%d}}\n\ndata: [DONE]\n\n", tokens)
	}
	return fmt.Sprintf(`{"choices":[{"text":"hi"}],"usage":{"total_tokens":%d}}`, tokens)
}

// compressingLLM reports ?tokens= as the llm upstream does, compressed
// with the encoding the request accepts (as real servers do), a stream
// flushed event by event. Accept-Encoding "x-custom" gets a body in an
// encoding nobody decodes, "corrupt" a gzip header followed by garbage.
var compressingLLM = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	tokens, _ := strconv.Atoi(r.URL.Query().Get("tokens"))
	body := usageBody(r.URL.Path, tokens)
	ct := "application/json"
	if r.URL.Path == "/sse" {
		ct = "text/event-stream"
	}
	w.Header().Set("Content-Type", ct)
	enc := r.Header.Get("Accept-Encoding")
	switch enc {
	case "", "identity":
		_, _ = io.WriteString(w, body)
		return
	case "x-custom":
		w.Header().Set("Content-Encoding", enc)
		_, _ = io.WriteString(w, strings.ToUpper(body))
		return
	case "corrupt":
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, body...))
		return
	}
	w.Header().Set("Content-Encoding", enc)
	cw := compressor(enc, w)
	for ev := range strings.SplitAfterSeq(body, "\n\n") {
		_, _ = io.WriteString(cw, ev)
		_ = cw.Flush()
		http.NewResponseController(w).Flush()
	}
	_ = cw.Close()
})

// rawClient gets the upstream's bytes, never decoding them itself.
var rawClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}

func getEncoded(t *testing.T, url, enc, key string) (*http.Response, []byte) {
	t.Helper()
	hr, _ := http.NewRequest("GET", url, nil)
	hr.Header.Set("Accept-Encoding", enc)
	hr.Header.Set("Authorization", "Bearer "+key)
	resp, err := rawClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestCompressedUsageIsMetered: a client asking for a compressed answer
// (gzip, deflate, br, zstd; a JSON body or a stream) is charged the
// tokens the answer reports, as a client that did not: 300 a request on
// a 1000 budget refuses the fifth request, and the client gets the
// upstream's compressed bytes unchanged.
func TestCompressedUsageIsMetered(t *testing.T) {
	t.Parallel()
	for _, enc := range []string{"gzip", "deflate", "br", "zstd"} {
		for _, path := range []string{"/json", "/sse"} {
			t.Run(enc+path, func(t *testing.T) {
				t.Parallel()
				cost := gateway.CostFromResponse{JSON: "usage.total_tokens", Estimate: 1}
				gs, _ := setupUpstream(t, gateway.Config{AnonymousPolicy: "tpm", Tiers: map[string]string{"k": "tpm"},
					Routes: []gateway.Route{{Path: "/", Policies: []string{"tier"}, CostFromResponse: &cost}}}, compressingLLM,
					limits.NamedPolicy{Name: "tpm", Algorithm: ratelimit.FixedWindow, Limit: 1000, Period: limits.Period(time.Minute)})
				for i := range 5 {
					resp, body := getEncoded(t, gs.URL+path+"?tokens=300", enc, "k")
					if i == 4 {
						if resp.StatusCode != 429 {
							t.Errorf("fifth request = %d, want 429 (4 x 300 tokens charged on a budget of 1000)", resp.StatusCode)
						}
						break
					}
					if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != enc {
						t.Fatalf("request %d = %d, Content-Encoding %q", i, resp.StatusCode, resp.Header.Get("Content-Encoding"))
					}
					if got, err := decompress(enc, body); err != nil || got != usageBody(path, 300) {
						t.Fatalf("request %d: the client's body decodes to %q, %v; want the upstream's", i, got, err)
					}
				}
			})
		}
	}
}

// TestUnreadableUsageKeepsTheEstimate: a body in an encoding the gateway
// does not decode, or a corrupt one, charges the estimate and is counted.
func TestUnreadableUsageKeepsTheEstimate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ accept, reason string }{{"x-custom", "encoding"}, {"corrupt", "corrupt"}} {
		t.Run(c.reason, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var counted []string
			cost := gateway.CostFromResponse{JSON: "usage.total_tokens", Estimate: 300}
			gs, _ := setupUpstreamOpts(t, gateway.Config{AnonymousPolicy: "tpm", Tiers: map[string]string{"k": "tpm"},
				Routes: []gateway.Route{{Path: "/", Policies: []string{"tier"}, CostFromResponse: &cost}}}, compressingLLM,
				func(o *gateway.Options) {
					o.UsageUnreadable = func(route, reason string) {
						mu.Lock()
						defer mu.Unlock()
						counted = append(counted, route+" "+reason)
					}
				},
				limits.NamedPolicy{Name: "tpm", Algorithm: ratelimit.FixedWindow, Limit: 1000, Period: limits.Period(time.Minute)})
			getEncoded(t, gs.URL+"/json?tokens=5", c.accept, "k")
			resp, _ := getEncoded(t, gs.URL+"/sse?tokens=5", c.accept, "k")
			if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "400" {
				t.Errorf("second request = %d remaining %s, want 200 with 400 left (the first kept its estimate of 300)",
					resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
			}
			getEncoded(t, gs.URL+"/json?tokens=5", "identity", "k") // read: not counted
			enginetest.Eventually(t, 5*time.Second, "both unreadable bodies counted", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(counted) >= 2
			})
			mu.Lock()
			defer mu.Unlock()
			if want := "/ " + c.reason; len(counted) != 2 || counted[0] != want || counted[1] != want {
				t.Errorf("counted %q, want %q twice", counted, want)
			}
		})
	}
}
