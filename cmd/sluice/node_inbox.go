package main

import (
	"context"
	"encoding/json"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/announce"
	"github.com/sluicehq/sluice/internal/inbox"
	"github.com/sluicehq/sluice/internal/panics"
)

// subjectInboxEvents carries every inbox event to every node (before the
// deployment's prefix): one subject, each node routing events to its own
// streams by user, so no node subscribes per user.
const subjectInboxEvents = "inbox.events"

// inboxPurgeEvery is how often a node deletes inbox messages older than
// the notification history's retention.
const inboxPurgeEvery = time.Hour

// startInbox builds the in-app inbox on the node's store. Its events
// cross nodes on core NATS: a message stored by a worker on any node
// reaches the streams every node holds. An event lost with NATS is caught
// up by the stream's next reconnect (Last-Event-ID), so best effort is
// enough.
func (n *node) startInbox(ctx context.Context) (*inbox.Service, error) {
	ic := n.cfg.Notify.Inbox
	bus := announce.New(n.queue.NATS(), n.queue.Name(subjectInboxEvents))
	svc := inbox.New(inbox.Options{Store: n.db, MaxStreams: ic.MaxStreams, MaxStreamsPerUser: ic.MaxStreamsPerUser,
		MaxStreamsPerKey: ic.MaxStreamsPerKey, Logger: n.log,
		Publish: func(e inbox.Event) error {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			return bus.Post(string(b))
		}})
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sluice_inbox_streams",
		Help: "In-app inbox event streams open on this node."}, func() float64 { return float64(svc.Streams()) }))
	stop, err := bus.Listen(panics.Func(n.panics, panics.Announce, func(data string) {
		var e inbox.Event
		if err := json.Unmarshal([]byte(data), &e); err == nil {
			svc.Receive(e)
		}
	}))
	if err != nil {
		return nil, err
	}
	n.onStop("inbox events", func(context.Context) error {
		svc.Close()
		return stop()
	})
	retention := n.cfg.Notify.Retention
	n.goBackground(ctx, "inbox purge", func(ctx context.Context) error {
		t := time.NewTicker(inboxPurgeEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
			for {
				deleted, err := n.db.DeleteInboxBefore(ctx, time.Now().Add(-retention), 10_000)
				if err != nil {
					n.log.Warn("inbox purge failed", "error", err)
				}
				if err != nil || deleted < 10_000 {
					break
				}
			}
		}
	})
	return svc, nil
}
