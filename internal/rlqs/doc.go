// Package rlqs serves Envoy's rate limit quota service
// (envoy.service.rate_limit_quota.v3.RateLimitQuotaService), so an Envoy
// with the rate_limit_quota HTTP filter decides every request locally and
// Sluice assigns each Envoy its share of each limit.
//
// # Buckets and rules
//
// An Envoy stream names its domain in its first usage report, then reports
// buckets, each a bucket_id map. A bucket's rule is the Envoy rate limit
// rule (internal/envoyrls) of that domain matched by the bucket id's
// entries taken in key order as a descriptor. Each reported bucket is
// answered with a quota assignment whose time to live is TTLIntervals of
// the client's report interval (learned from its reports' time_elapsed):
//
//   - a limited rule: the client's share as a token bucket (token_bucket
//     and gcra rules) or requests_per_time_unit (fixed and sliding
//     windows);
//   - unlimited: ALLOW_ALL; requests_per_unit 0: DENY_ALL;
//   - shadow_mode rules: ALLOW_ALL, the requests past the share counted in
//     sluice_rlqs_shadow_would_deny_total;
//   - an emergency block on one of the entries: DENY_ALL until it ends;
//   - no rule: the blanket rule Options.DenyUnmatched names (ALLOW_ALL by
//     default).
//
// When the rules change (SetConfig) every stream re-evaluates its buckets
// at once: a bucket whose rule was removed gets an abandon action, one
// whose rule changed its new assignment.
//
// # Shares
//
// Every client's demand (requests allowed and denied per rule period) is
// kept per bucket in a DemandStore shared by the nodes (redisdemand, or
// MemoryDemand on one node), written once per report. A client is
// Options.ClientID (the peer's IP address, or its API key): one client's
// streams on a bucket are one row of the table per node, and split the
// share it gets (group.go). Shares divides the
// limit between the live clients: a floor for every client, the rest
// max-min fairly by demand, leftovers evenly. A client that stops
// reporting is dropped after ExpiryIntervals report intervals, freeing
// its share; a stream that ends frees its shares at once. When a client
// joins or leaves a bucket, or its report raises its share, the node's
// other streams of that bucket are re-evaluated and pushed their new
// shares at once; clients on other nodes get theirs at their next report.
//
// # Bounds
//
// Nothing one client sends holds memory past a cap (bounds.go): streams
// per client and per node, buckets per stream, per client and per node
// (RESOURCE_EXHAUSTED past them), reports per second per stream
// (RESOURCE_EXHAUSTED), a deadline for a stream's first report
// (DEADLINE_EXCEEDED), and counts, domains and bucket ids of bounded size
// (INVALID_ARGUMENT; an oversized id is answered without being tracked).
// Buckets are keyed by a 128-bit SHA-256 of the domain and id, and each
// id is held once per node.
package rlqs
