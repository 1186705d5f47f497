package main

import (
	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/gateway"
)

// gatewayConfig is the gateway section of the configuration in the
// gateway's own terms. A route's lists keep nil apart from empty (YAML's
// policies: [] checks no tier).
func gatewayConfig(c config.Gateway) gateway.Config {
	g := gateway.Config{Upstream: c.Upstream, DefaultTier: c.DefaultTier, AnonymousPolicy: c.AnonymousPolicy, Tiers: c.Tiers,
		Global: gateway.Global{Policy: c.Global.Policy, MaxWait: c.Global.MaxWait}}
	for _, r := range c.Routes {
		route := gateway.Route{Path: r.Path, Methods: r.Methods, Policies: r.Policies, RequireKey: r.RequireKey,
			Streaming: r.Streaming, IPPolicy: r.IPPolicy, AccountField: r.AccountField, AccountPolicy: r.AccountPolicy,
			CountStatuses: r.CountStatuses}
		if cr := r.CostFromResponse; cr != nil {
			route.CostFromResponse = &gateway.CostFromResponse{Header: cr.Header, JSON: cr.JSON, Estimate: cr.Estimate, Policies: cr.Policies}
		}
		g.Routes = append(g.Routes, route)
	}
	return g
}
