package httpapi

import "github.com/sluicehq/sluice/internal/notify"

// digestJSON is a digest on a notification's timeline: the digest the
// notification joined, or the one it is the message of. Items name the
// events without their data, which may be large; the message's data holds
// their rendered lines.
type digestJSON struct {
	ID             string           `json:"id"`
	Channel        notify.Channel   `json:"channel"`
	WindowEnd      string           `json:"window_end"`
	Count          int              `json:"count"`
	MaxItems       int              `json:"max_items"`
	Closed         bool             `json:"closed"`
	NotificationID string           `json:"notification_id,omitempty"`
	Items          []digestItemJSON `json:"items"`
}

type digestItemJSON struct {
	NotificationID string `json:"notification_id"`
	At             string `json:"at"`
}

func toDigestJSON(d notify.Digest) digestJSON {
	out := digestJSON{ID: d.ID, Channel: d.Channel, WindowEnd: timestamp(d.WindowEnd), Count: d.Count, MaxItems: d.MaxItems,
		Closed: d.Closed, NotificationID: d.NotificationID, Items: make([]digestItemJSON, len(d.Items))}
	for i, it := range d.Items {
		out.Items[i] = digestItemJSON{NotificationID: it.NotificationID, At: timestamp(it.At)}
	}
	return out
}
