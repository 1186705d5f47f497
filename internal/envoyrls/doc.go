// Package envoyrls serves Envoy's rate limit service
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) on Sluice's
// rate limiter, so Envoy, Istio, Contour, Gloo and Emissary can use Sluice in
// place of envoyproxy/ratelimit.
//
// It is the gRPC adapter of rate limiting: its rules come from its own
// YAML, not from internal/limits' named policies, and its counters from the
// ratelimit.Store it is given (Options.Store).
//
// # Configuration
//
// A Config is loaded from envoyproxy/ratelimit's YAML format: one file per
// domain, each with nested descriptors (key, optional value, a value ending
// in "*" matching by prefix) and rate_limit blocks (unit, requests_per_unit,
// unlimited, name, replaces), plus shadow_mode and detailed_metric. Sluice
// adds two keys inside rate_limit: algorithm (fixed_window by default, as in
// that project, or token_bucket, gcra, sliding_window_log,
// sliding_window_counter) and burst (token_bucket and gcra only; default
// requests_per_unit). Validation is as strict as that project's: unknown
// keys, an empty domain or key, duplicate domains or descriptors, bad units
// and a rule replacing itself are errors naming the file, line and path.
// Load reads a file or every .yaml/.yml file of a folder; a Watcher polls
// them and swaps a new Config into the Server when they change, keeping the
// previous one when the new files are bad.
//
// # Matching
//
// Each request descriptor walks its domain's tree one entry at a time:
// the exact key and value first, then a wildcard value, then the bare key.
// The rule of the node reached by the descriptor's last entry applies; a
// descriptor that stops early, an unknown domain or a node without a rule
// means no limit. A descriptor's own limit override replaces the configured
// rule (a fixed window of its requests_per_unit per unit).
//
// # Counting
//
// Sluice keeps its own counting rule: every limited descriptor of a request
// is checked in one atomic step of the ratelimit.Store (ratelimit.AllowAll),
// and either all are charged or, when any is over its limit, none is. A
// refused request charges nothing; envoyproxy/ratelimit charges every
// descriptor even when one is over. Shadow-mode rules never refuse: a
// would-be refusal is counted in metrics, charges nothing on its own key,
// and lets the other descriptors through.
//
// # Blocks
//
// Options.Blocked is asked about every entry of every request, in
// configured domains and others: a descriptor carrying a blocked entry
// answers OVER_LIMIT until the block ends, whatever its counters say, and
// its request charges nothing, as for any refused request. Sluice hands
// in the emergency blocks of the HTTP API (limits.Rules.EntryBlocked).
//
// Counters are kept per rule and per full descriptor (domain and every
// key and value, the way envoyproxy/ratelimit builds its cache keys), under
// a ratelimit.Policy whose Name carries the domain, the rule's path and its
// limit, so editing a limit starts fresh counts.
//
// # Usage-based limits
//
// A rule can charge what a request used once its stream is done
// (docs/envoy.md, "Token budgets"; usage.go). Envoy sends a rate limit action with apply_on_stream_done: true in a
// second ShouldRateLimit call when the stream is done, whose answer it
// ignores, and its hits_addend (descriptor-level, from route's
// RateLimit.hits_addend, often a %DYNAMIC_METADATA(...)% format such as an
// AI gateway's token count) is the cost. A rule marked charge: always
// charges a descriptor carrying its own hits_addend above 0 (such a call)
// even over the limit, after the fact and into debt, where Sluice otherwise
// charges nothing for an over-limit call. The request-time call on the rule
// refuses while the key is exhausted or in debt: with a descriptor
// hits_addend of 0 (Envoy Gateway's request cost 0) it charges nothing, and
// without one (the request's hits, 1 by default) it is an ordinary check.
package envoyrls
