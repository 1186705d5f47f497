package notify

import "time"

// TokenRef is how a hop names a push token: its last 12 characters after
// an ellipsis, enough to tell a user's devices apart without showing the
// whole token (which lets anyone holding the app's credentials reach the
// device).
func TokenRef(token string) string {
	if len(token) <= 12 {
		return token
	}
	return "…" + token[len(token)-12:]
}

// Hop is one provider call (or skipped call) made for a delivery: the
// primary, a backup provider, or a provider of another channel a critical
// message failed over to. Deliveries keep every hop of their last attempt
// that did not end at the first provider.
type Hop struct {
	Provider string  `json:"provider"`
	Channel  Channel `json:"channel"`
	Result   string  `json:"result"` // ok, temporary, permanent or unavailable
	// To names the push token of the call (see TokenRef); empty for other
	// channels.
	To    string    `json:"to,omitempty"`
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}
