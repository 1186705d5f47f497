package main

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/linklive"
	"github.com/sluicehq/sluice/internal/linklive/natsbus"
	"github.com/sluicehq/sluice/internal/panics"
	"github.com/sluicehq/sluice/internal/shorten"
)

// Names of the live link hits' stream and subjects (before the
// deployment's prefix): subjects links.hits.<link id>.
const (
	streamLinkHits  = "LINK_HITS"
	subjectLinkHits = "links.hits"
)

// liveLinks is the live link stats feed of a node: its hub, which the
// HTTP streams subscribe to, and publish, the click flusher's hook.
type liveLinks struct {
	hub     *linklive.Hub
	publish func(clicks []shorten.Click)
}

// startLinkLive builds the live link stats feed on the node's NATS (the
// embedded one by default): every recorded hit is published on a
// JetStream stream kept in memory for links.live.replay_window, which
// every node reads into its own streams, so a stream on any node sees
// the redirects every node served, and a stream that reconnects resumes
// from the stream's recent hits.
func (n *node) startLinkLive(ctx context.Context) (*liveLinks, error) {
	cfg := n.cfg.Links.Live
	stream, err := n.queue.EnsureStream(ctx, natsbus.StreamConfig(n.queue.Name(streamLinkHits), n.queue.Name(subjectLinkHits), cfg.ReplayWindow))
	if err != nil {
		return nil, fmt.Errorf("live link stats: %w", err)
	}
	bus := natsbus.NewBus(n.queue.NATS(), stream, n.queue.Name(subjectLinkHits), n.log)
	hub := linklive.NewHub(linklive.Options{MaxStreams: cfg.MaxStreams, MaxPerCaller: cfg.MaxPerKey, Buffer: cfg.Buffer, Replay: bus.Since})
	// A hit that panics the streams' fan-out is dropped (panics.Announce).
	stop, err := bus.ListenFunc(ctx, panics.Func(n.panics, panics.Announce, hub.Receive))
	if err != nil {
		return nil, err
	}
	n.onStop("live link stats", func(context.Context) error {
		hub.Close()
		stop()
		return nil
	})
	// Stopped after the click flusher (started later), so the hits of
	// its last flush are published too.
	n.goBackground(ctx, "live link hits publisher", bus.Run)
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_links_live_streams",
		Help: "Live link stats streams open on this node."}, func() float64 { return float64(hub.Streams()) }))
	for _, outcome := range []string{"sent", "dropped"} {
		n.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_links_live_events_total",
			Help:        "Hits of live link stats streams on this node: sent to a client, or dropped (a stream cut off for falling behind, or recorded hits not published, NATS too slow or down).",
			ConstLabels: prometheus.Labels{"outcome": outcome}}, func() float64 {
			sent, dropped := hub.Counts()
			if outcome == "sent" {
				return float64(sent)
			}
			return float64(dropped + bus.Dropped())
		}))
	}
	return &liveLinks{hub: hub, publish: bus.Publish}, nil
}
