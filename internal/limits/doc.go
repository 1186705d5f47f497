// Package limits is Sluice's rate limit service: named policies with modes,
// emergency blocks, and the verdicts given against them, on top of the
// public ratelimit library.
//
// # Two packages, two vocabularies
//
// Package ratelimit (public, stdlib only) knows algorithms and stores: a
// ratelimit.Policy is an algorithm with a limit and a period, and a
// ratelimit.Decision is what a store answers for one key. This package
// knows the product: a [NamedPolicy] is a ratelimit.Policy given a name, a
// mode (hard, soft, shadow), a store failure rule and a source (database or
// configuration), and a [Verdict] is a ratelimit.Decision read under that
// mode. Only this package turns one into the other ([NamedPolicy.Effective],
// [NamedPolicy.apply]).
//
// Package limits is a domain package: it imports the ratelimit library and
// apperr, and must import no infrastructure (no Prometheus, database
// driver, Redis or NATS client; cmd/sluice's
// TestDomainImportsNoInfrastructure checks it). It reports through the
// [Metrics] hooks (which package internal/metrics binds to Prometheus) and
// stores rules through the [RuleStore] interface it owns.
//
// # Rules and state
//
// Rules (policies and blocks) and state (counters) live apart, rules sit in
// the record store and in the YAML configuration, and every node keeps them
// in memory in a [Rules] cache filled by a background retriever
// ([Rules.Run]); state lives in a ratelimit.Store (memory, or Redis shared
// by every node). A check reads the cache and makes one store call, never a
// database query. A change made through a [Service] is applied to its own
// cache at once and announced to the other nodes (Options.Announce, a
// [Change]), which refresh within milliseconds ([Service.Heard]); the
// periodic refresh is the fallback when an announcement is lost. Resets
// are announced too, so that no node's [HotKeys] goes on refusing a key
// whose counters are gone.
//
// Policies come from three places, later ones hiding earlier ones of the
// same name: the defaults shipped in the database by its migration (free,
// paid, enterprise), the database as changed through the API, and the YAML
// configuration, whose policies cannot be changed through the API.
//
// # Modes
//
// A hard policy refuses over-limit requests. A soft policy admits up to
// BurstOver more than its capacity, flagging them WouldRefuse: it is
// applied as the same policy with BurstOver added to its capacity, and the
// decision is reported against the hard capacity. A shadow policy never
// refuses: it counts, and flags with WouldRefuse (and the metrics) the
// requests its hard form would have refused. Simulate applies the very same
// transformation, so it agrees with live decisions exactly.
//
// # Store failure
//
// [Failover] wraps a remote store (Redis): when it fails, decisions come
// from a local memory store at the policy's limit divided by the node
// count, or are refused for policies with OnStoreFailure closed, until the
// remote store answers again. [HotKeys] answers keys already over their
// limit locally until their retry time, without a round trip.
package limits
