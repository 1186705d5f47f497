package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/gateway"
)

// TestGatewayConfigFromYAML loads a gateway section through config.Load
// and checks what the gateway is given: every field carried over, and a
// route's policies: [] kept empty (no tier) apart from an absent list (the
// tier).
func TestGatewayConfigFromYAML(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	yml := `
gateway:
  listen: 127.0.0.1:0
  upstream: http://127.0.0.1:1
  default_tier: bronze
  anonymous_policy: anon
  tiers: {gold-key: gold}
  global: {policy: capacity, max_wait: 2s}
  routes:
    - path: /login
      methods: [POST]
      policies: []
      ip_policy: login_ip
      account_field: email
      account_policy: login_account
      count_statuses: [401, 403]
    - path: /v1/chat
      streaming: true
      require_key: true
      cost_from_response: {json: usage.total_tokens, estimate: 100, policies: [tokens]}
    - path: /other
`
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--config", file}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	got := gatewayConfig(cfg.Gateway)
	want := gateway.Config{Upstream: "http://127.0.0.1:1", DefaultTier: "bronze", AnonymousPolicy: "anon",
		Tiers: map[string]string{"gold-key": "gold"}, Global: gateway.Global{Policy: "capacity", MaxWait: 2 * time.Second},
		Routes: []gateway.Route{
			{Path: "/login", Methods: []string{"POST"}, Policies: []string{}, IPPolicy: "login_ip", AccountField: "email",
				AccountPolicy: "login_account", CountStatuses: []int{401, 403}},
			{Path: "/v1/chat", Streaming: true, RequireKey: true, CostFromResponse: &gateway.CostFromResponse{
				JSON: "usage.total_tokens", Estimate: 100, Policies: []string{"tokens"}}},
			{Path: "/other"},
		}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("gatewayConfig =\n%#v\nwant\n%#v", got, want)
	}
	if got.Routes[0].Policies == nil || got.Routes[2].Policies != nil {
		t.Errorf("policies: [] and an absent list: %#v and %#v, want empty and nil", got.Routes[0].Policies, got.Routes[2].Policies)
	}
}
