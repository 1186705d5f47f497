// Package metrics defines every sluice_* Prometheus series of the domain
// packages (limits, shorten, notify), of the record store's group commit
// and of the runtime; it is the only package that imports Prometheus
// besides the HTTP and gRPC adapters' own request metrics, which stay with
// their adapters: sluice_http_* in internal/httpapi/metrics.go and
// sluice_envoy_* in internal/envoyrls/metrics.go.
//
// The domain packages import no Prometheus: each reports through hooks it
// owns, and this package binds them to series.
//
//   - [NewLimits]: sluice_ratelimit_*, the hooks for limits.Service and
//     limits.Failover (limits.Metrics).
//   - [NewLinks]: sluice_links_*, the hooks for shorten.Service
//     (shorten.Metrics), with label values resolved once for the redirect
//     path.
//   - [NewDeliveries]: sluice_notify_deliveries_total and
//     sluice_notify_delivery_seconds, the observer for
//     notify.Options.Observe.
//   - [NewProviders]: sluice_notify_provider_*, the hooks for guard.Provider
//     (guard.Metrics) and the breaker state gauge.
//   - [NewQueueLag]: sluice_notify_queue_oldest_job_seconds, asked of the
//     queue at scrape time.
//   - [RegisterStore]: sluice_store_*, read from the store's BatchStats at
//     scrape time.
//   - [NewWorkflows]: sluice_workflow_*, the hooks for workflow.Service
//     (workflow.Metrics) and the live runs gauge (Workflows.WatchRuns).
//   - [NewPanics]: sluice_panics_total, the count for panics.Reporter.
//   - [NewRegistry]: a node's registry, with the Go runtime and process
//     collectors as sluice_go_* and sluice_process_*.
//
// docs/operations.md lists every series; cmd/sluice's TestMetricsDocumented
// keeps that list in step with what a node serves.
package metrics
