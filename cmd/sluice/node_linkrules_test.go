package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/sluicehq/sluice/internal/enginetest"
)

// writeGeoDB writes a GeoLite2-City-shaped database placing every
// loopback address in country.
func writeGeoDB(t *testing.T, country string) string {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: "GeoLite2-City", RecordSize: 24, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	if err := tree.Insert(loopback, mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(country)}}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := tree.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "city.mmdb")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sendNoFollow makes a request without following redirects.
func sendNoFollow(t *testing.T, method, url, body string) *http.Response {
	t.Helper()
	return sendThrough(t, noFollow, method, url, body)
}

// sendThrough sends method url with body (JSON unless empty) through c;
// the answer's body is closed when the test ends.
func sendThrough(t *testing.T, c *http.Client, method, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestServeGeoRules: `sluice serve` with links.geoip_db sends a visitor
// from the database's country to the country rule's target; without the
// setting, the same rule is refused with a 422 naming links.geoip_db; and a
// configured file that is not there stops the server at start.
func TestServeGeoRules(t *testing.T) {
	t.Parallel()
	rules := `{"rules":[{"name":"fr","if":{"country":["FR"]},"url":"https://example.fr/"}]}`

	cfg := testConfig(t)
	cfg.Links.GeoIPDB = writeGeoDB(t, "FR")
	n := startNode(t, cfg)
	if r := sendNoFollow(t, "POST", n.httpURL+"/v1/links", `{"url":"https://example.com/page","slug":"geo"}`); r.StatusCode != http.StatusCreated {
		t.Fatalf("create = %d", r.StatusCode)
	}
	if r := sendNoFollow(t, "PUT", n.httpURL+"/v1/links/geo/rules", rules); r.StatusCode != http.StatusOK {
		t.Fatalf("PUT rules = %d", r.StatusCode)
	}
	if r := sendNoFollow(t, "GET", n.httpURL+"/geo", ""); r.StatusCode != http.StatusFound || r.Header.Get("Location") != "https://example.fr/" {
		t.Errorf("GET /geo from a French address = %d to %q, want 302 to https://example.fr/", r.StatusCode, r.Header.Get("Location"))
	}
	// The click is counted under the database's country in the stats (the
	// flusher asks the same database), and under the rule that matched.
	for _, group := range []string{"country", "target"} {
		want := map[string]string{"country": `"value":"FR"`, "target": `"value":"fr"`}[group]
		enginetest.EventuallyNil(t, 10*time.Second, "the click in the stats by "+group, func() error {
			r := sendNoFollow(t, "GET", n.httpURL+"/v1/links/geo/stats?group="+group, "")
			var b bytes.Buffer
			_, _ = b.ReadFrom(r.Body)
			return enginetest.State(r.StatusCode == http.StatusOK && strings.Contains(b.String(), want),
				"stats by %s = %d %s; want a group %s", group, r.StatusCode, b.String(), want)
		})
	}

	plain := startNode(t, testConfig(t))
	if r := sendNoFollow(t, "POST", plain.httpURL+"/v1/links", `{"url":"https://example.com/page","slug":"geo"}`); r.StatusCode != http.StatusCreated {
		t.Fatalf("create = %d", r.StatusCode)
	}
	r := sendNoFollow(t, "PUT", plain.httpURL+"/v1/links/geo/rules", rules)
	var body bytes.Buffer
	_, _ = body.ReadFrom(r.Body)
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body.String(), "links.geoip_db") ||
		!strings.Contains(body.String(), "rules[0].if.country") {
		t.Errorf("PUT a country rule without a database = %d %s; want 422 naming rules[0].if.country and links.geoip_db", r.StatusCode, body.String())
	}

	missing := testConfig(t)
	missing.Links.GeoIPDB = filepath.Join(t.TempDir(), "absent.mmdb")
	err := serve(context.Background(), missing, slog.New(slog.DiscardHandler), func(bound) {
		t.Error("serve listened with a missing GeoIP database")
	})
	if err == nil || !strings.Contains(err.Error(), "links.geoip_db") {
		t.Errorf("serve with a missing GeoIP database = %v, want an error naming links.geoip_db", err)
	}
}
