package main

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestMetricsDocumented keeps docs/operations.md's metric table in step
// with the code: every sluice_* family a node serves after some traffic on
// each area must be named there. (Families whose vectors have no series
// yet are not served, so the traffic below touches each area.)
func TestMetricsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, testConfig(t))
	var k struct {
		Key string `json:"key"`
	}
	apiCall(t, n, "POST", "/v1/keys", "", map[string]any{"name": "m", "scopes": []string{"admin"}}, http.StatusCreated, &k)
	apiCall(t, n, "POST", "/v1/ratelimit/check", k.Key, map[string]any{"policy": "free", "key": "k"}, http.StatusOK, nil)
	var l struct {
		Code string `json:"code"`
	}
	apiCall(t, n, "POST", "/v1/links", k.Key, map[string]any{"url": "https://example.com/"}, http.StatusCreated, &l)
	apiCall(t, n, "GET", "/nope-"+l.Code, "", nil, http.StatusNotFound, nil)

	_, body := get(t, n.httpURL+"/metrics")
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "#" || f[1] != "HELP" {
			continue
		}
		name := f[2]
		if strings.HasPrefix(name, "sluice_go_") || strings.HasPrefix(name, "sluice_process_") {
			continue // documented as families
		}
		seen++
		if !bytes.Contains(doc, []byte("`"+name+"`")) {
			t.Errorf("metric %s is served but not listed in docs/operations.md", name)
		}
	}
	if seen < 5 {
		t.Fatalf("only %d sluice_* families served; the scrape looks wrong", seen)
	}
}
