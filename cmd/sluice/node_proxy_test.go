package main

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip (127.0.0.2, 127.0.0.3: distinct clients on one machine), not
// following redirects.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
}

// status is roundTrip's status.
func status(t *testing.T, c *http.Client, method, url, body string) int {
	t.Helper()
	code, _ := roundTrip(t, c, method, url, body)
	return code
}

// roundTrip sends method url with body (JSON unless empty) through c and
// returns the status and the body, read whole.
func roundTrip(t *testing.T, c *http.Client, method, url, body string) (int, []byte) {
	t.Helper()
	resp := sendThrough(t, c, method, url, body)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// TestBehindHAProxy runs two nodes sharing their engines behind a real
// HAProxy, once passing the client by PROXY protocol v2 (--proxy-protocol)
// and once by X-Forwarded-For (option forwardfor), with HAProxy's address
// as --trusted-proxies. Two clients, leaving from 127.0.0.2 and 127.0.0.3,
// must be told apart by the shortener's unknown-code limit, the access log
// and the gateway's per-IP login limit, as they would be without the
// load balancer.
func TestBehindHAProxy(t *testing.T) {
	enginetest.Faults(t)
	t.Parallel()
	tests := []struct {
		name          string
		lb            enginetest.HAProxy
		proxyProtocol bool
	}{
		{"send-proxy-v2", enginetest.HAProxy{SendProxyV2: true}, true},
		{"forwardfor", enginetest.HAProxy{ForwardFor: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testBehindHAProxy(t, tt.lb, tt.proxyProtocol)
		})
	}
}

func testBehindHAProxy(t *testing.T, lb enginetest.HAProxy, proxyProtocol bool) {
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") })}
	upLn := listenLocal(t)
	go up.Serve(upLn)
	t.Cleanup(func() { up.Close() })

	cfg := sharedEngines(t)
	cfg.Ratelimit.Nodes = 2
	cfg.TrustedProxies, cfg.ProxyProtocol = []string{"127.0.0.1/32"}, proxyProtocol
	cfg.Links.UnknownPerMinute = 3
	cfg.Gateway.Upstream = "http://" + upLn.Addr().String()
	cfg.Gateway.Routes = []config.GatewayRoute{{Path: "/login", Methods: []string{"POST"}, Policies: []string{},
		IPPolicy: "login_ip", AccountField: "username", AccountPolicy: "login_account"}}
	cfg.Ratelimit.Policies = []limits.NamedPolicy{
		{Name: "login_ip", Algorithm: ratelimit.FixedWindow, Limit: 2, Period: limits.Period(time.Hour)},
		{Name: "login_account", Algorithm: ratelimit.FixedWindow, Limit: 100, Period: limits.Period(time.Hour)},
	}
	var logs enginetest.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var nodes, gateways []string
	for range 2 {
		cfg.Gateway.Listen = "127.0.0.1:0"
		cfg.DataDir = t.TempDir()
		n := startNodeLogging(t, cfg, log)
		nodes = append(nodes, strings.TrimPrefix(n.httpURL, "http://"))
		gateways = append(gateways, n.gatewayAddr)
	}
	lb.Backends = nodes
	api := enginetest.StartHAProxy(t, lb).URL()
	lb.Backends = gateways
	gateway := enginetest.StartHAProxy(t, lb).URL()

	// A link, made on a node directly (keyless: loopback).
	if code, body := send(t, "POST", "http://"+nodes[0]+"/v1/links", `{"url":"https://example.com/","slug":"live"}`); code != 201 {
		t.Fatalf("POST /v1/links = %d %v", code, body)
	}
	scanner, visitor := clientFrom("127.0.0.2"), clientFrom("127.0.0.3")
	for i := range 3 {
		if got := status(t, scanner, "GET", api+"/scan"+string(rune('a'+i)), ""); got != 404 {
			t.Fatalf("scanner's unknown code #%d through HAProxy = %d, want 404", i+1, got)
		}
	}
	if got := status(t, scanner, "GET", api+"/scanz", ""); got != 429 {
		t.Errorf("scanner's 4th unknown code = %d, want 429 (3 a minute, counted over both nodes)", got)
	}
	if got := status(t, visitor, "GET", api+"/nothere", ""); got != 404 {
		t.Errorf("another client's unknown code = %d, want 404: the scanner's limit is its own", got)
	}
	if got := status(t, visitor, "GET", api+"/live", ""); got != 302 {
		t.Errorf("another client's live link = %d, want 302", got)
	}
	enginetest.EventuallyNil(t, 5*time.Second, "the access log names both clients", func() error {
		out := logs.String()
		return enginetest.State(strings.Contains(out, "remote=127.0.0.2 peer=127.0.0.1:") && strings.Contains(out, "remote=127.0.0.3 peer=127.0.0.1:"), "%s", "")
	})

	login := func(c *http.Client, user string) int {
		return status(t, c, "POST", gateway+"/login", `{"username":"`+user+`","password":"x"}`)
	}
	for i, user := range []string{"ann", "bob"} {
		if got := login(scanner, user); got != 200 {
			t.Fatalf("scanner's login #%d through HAProxy and the gateway = %d, want 200", i+1, got)
		}
	}
	if got := login(scanner, "cid"); got != 429 {
		t.Errorf("scanner's 3rd login = %d, want 429 (login_ip: 2 per IP)", got)
	}
	if got := login(visitor, "dan"); got != 200 {
		t.Errorf("another client's login = %d, want 200: the per-IP limit is per client", got)
	}
}
