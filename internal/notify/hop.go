package notify

import "time"

// Hop is one provider call (or skipped call) made for a delivery: the
// primary, a backup provider, or a provider of another channel a critical
// message failed over to. Deliveries keep every hop of their last attempt
// that did not end at the first provider.
type Hop struct {
	Provider string    `json:"provider"`
	Channel  Channel   `json:"channel"`
	Result   string    `json:"result"` // ok, temporary, permanent or unavailable
	Error    string    `json:"error,omitempty"`
	At       time.Time `json:"at"`
}
