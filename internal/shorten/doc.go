// Package shorten is Sluice's URL shortener: links, their codes, the
// redirect path and click statistics.
//
// This is a domain package: it must not import infrastructure (Prometheus,
// database drivers, Redis or NATS clients; cmd/sluice's
// TestDomainImportsNoInfrastructure checks it). The record store implements
// [Store], Redis (when configured) implements [SharedCache], the rate
// limiter plugs in through [Limiter], and the service reports through the
// [Metrics] hooks it owns, which package internal/metrics binds to
// Prometheus series.
//
// # Codes
//
// Each link gets an id from a database sequence; [Codec] permutes it with a
// keyed Feistel network over [0, 62^n) and writes it in base62, so codes
// are short, unique by construction and unrelated for consecutive ids. A
// link may instead carry a custom slug ([ValidateSlug]).
//
// # Redirects
//
// [Service.Resolve] answers from a bounded in-process cache whose entries
// carry the link's expiry, checked on every hit, then from the shared
// cache, then from the store, with one lookup per code in flight
// (singleflight) and negative caching of unknown codes. A hit is appended
// to a bounded [ClickBuffer] and written in batches by its flusher; the
// redirect itself never writes to the database (visit-limited links
// excepted, below). [Service.Delete] announces
// the code to every node (Options.Announce), each of which drops it from
// its cache ([Service.Forget]); the cache TTL bounds how long a node whose
// announcement was lost keeps redirecting it.
//
// # Clicks
//
// Hits are classified by [ClassifyHit]: HEAD requests, link-preview
// fetchers, scanners, crawlers and tools are bot hits with a reason; the
// rest are human clicks. A link reports its human clicks, bot hits and the
// time of the first human click.
//
// # Extras, analytics and attribution
//
// A link may carry [LinkExtras]: a visit limit, spent by one atomic
// conditional update in the store per human visit ([Service.Visit],
// [VisitStore]) so it is exact across nodes; a fallback URL; and click
// ids, signed random ids appended to the target that [Service.Convert]
// turns into conversions ([ConversionStore]). Links with extras bypass the
// shared cache and announcements, whose encodings do not carry them. Each
// click keeps its [Dimensions] (source, country, device, OS, referrer,
// language); the store rolls them up per link, hour and value as it writes
// them, and [Service.Stats] reads the rollups ([StatsStore]).
// [QRModules] encodes a link's QR code.
package shorten
