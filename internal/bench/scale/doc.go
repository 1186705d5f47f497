// Package scale holds the scale curve: how the cost of Sluice's reads and
// redirects grows as its tables grow (links and clicks, notifications and
// deliveries), what a rate limit key costs in memory and on Redis, and how
// waiting workflow runs resume and meet their deadlines as they grow to a
// million (TestWorkflowScale). It is a benchmark, not a test of behaviour,
// and runs only when asked:
//
//	make scale                         # every engine, the sizes in docs/benchmarks.md
//	SLUICE_SCALE=1 go test -run TestScale -v ./internal/bench/scale/ -args -scale.fraction 0.01
//
// Tables are filled through the store (links and clicks, as the shortener
// writes them) or by one INSERT ... SELECT per batch (notifications and
// deliveries, whose one-at-a-time API would take hours), then a `sluice
// serve` process on that store is measured from outside over HTTP.
package scale
