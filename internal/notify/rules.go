package notify

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// DigestRule gathers a type's notifications to one user on one channel into
// one message per window. The zero value is invalid; Window is required.
type DigestRule struct {
	// Window is how long a digest stays open after the event that opened
	// it, as a Go duration ("10m"): from 1s to 24h.
	Window string `json:"window"`
	// MaxItems caps a digest's events (1 to 1000). A digest that fills up
	// goes out at once and the next event opens a new window. If zero, 50.
	MaxItems int `json:"max_items,omitempty"`
	// Item is the text of one event's line in {items}, filled from that
	// event's data. If empty, the event's data as "key: value" pairs.
	Item string `json:"item,omitempty"`
}

// Bounds of a DigestRule.
const (
	DefaultDigestItems = 50
	MaxDigestItems     = 1000
	MinDigestWindow    = time.Second
	MaxDigestWindow    = 24 * time.Hour
)

// WindowDuration returns Window parsed; zero when it does not parse.
func (r DigestRule) WindowDuration() time.Duration {
	d, _ := time.ParseDuration(r.Window)
	return d
}

// Items returns MaxItems with its default.
func (r DigestRule) Items() int {
	if r.MaxItems == 0 {
		return DefaultDigestItems
	}
	return r.MaxItems
}

// Engagement conditions of an EscalationRule: any one that holds when the
// escalation is due cancels it.
const (
	// EngagedDelivered: a provider receipt said another channel's
	// delivery of the notification was delivered.
	EngagedDelivered = "delivered"
	// EngagedClicked: a tracked link of the notification (an SMS short
	// link or an email's tracked link) was clicked by a person (bots,
	// scanners and link previews do not count).
	EngagedClicked = "clicked"
	// EngagedOpened: the notification's email was opened by a person (its
	// open pixel was loaded, or one of its tracked links clicked).
	EngagedOpened = "opened"
	// EngagedRead: the user read the notification in the in-app inbox
	// (asked of Options.Reads; never holds without one).
	EngagedRead = "read"
)

// engagements lists the conditions in the order they are checked, and
// defaultEngagements those an escalation without Unless waits on.
var (
	engagements        = []string{EngagedDelivered, EngagedClicked, EngagedOpened, EngagedRead}
	defaultEngagements = []string{EngagedDelivered, EngagedClicked, EngagedRead}
)

// EscalationRule holds a type's channels To back when a notification is
// accepted, and sends them After later unless the user engaged with the
// notification on its other channels by then. The zero value is invalid.
type EscalationRule struct {
	// After is the wait, as a Go duration ("10m"): from 1s to 7 days.
	After string `json:"after"`
	// Unless lists the conditions that cancel the escalation (delivered,
	// clicked, opened, read). If empty, delivered, clicked and read.
	Unless []string `json:"unless,omitempty"`
	// To are the channels held back and sent on escalation.
	To []Channel `json:"to"`
}

// Bounds of an EscalationRule.
const (
	MinEscalationAfter = time.Second
	MaxEscalationAfter = 7 * 24 * time.Hour
)

// AfterDuration returns After parsed; zero when it does not parse.
func (r EscalationRule) AfterDuration() time.Duration {
	d, _ := time.ParseDuration(r.After)
	return d
}

// Conditions returns Unless with its default.
func (r EscalationRule) Conditions() []string {
	if len(r.Unless) == 0 {
		return defaultEngagements
	}
	return r.Unless
}

// validateRules checks t's digest and escalation rules, naming each bad
// field.
func validateRules(t Template) []apperr.FieldError {
	var errs []apperr.FieldError
	if r := t.Digest; r != nil {
		if t.Category == Critical {
			errs = append(errs, fe("digest", "critical notifications are never digested"))
		}
		if d := r.WindowDuration(); d < MinDigestWindow || d > MaxDigestWindow {
			errs = append(errs, fe("digest.window", fmt.Sprintf("must be a duration from %s to %s, like 10m", MinDigestWindow, MaxDigestWindow)))
		}
		if r.MaxItems < 0 || r.MaxItems > MaxDigestItems {
			errs = append(errs, fe("digest.max_items", fmt.Sprintf("must be 1 to %d", MaxDigestItems)))
		}
		if len(r.Item) > 1000 {
			errs = append(errs, fe("digest.item", "must be at most 1000 bytes"))
		}
	}
	if r := t.Escalation; r != nil {
		if d := r.AfterDuration(); d < MinEscalationAfter || d > MaxEscalationAfter {
			errs = append(errs, fe("escalation.after", "must be a duration from 1s to 168h, like 10m"))
		}
		for i, c := range r.Unless {
			if !slices.Contains(engagements, c) || slices.Index(r.Unless, c) != i {
				errs = append(errs, fe(fmt.Sprintf("escalation.unless[%d]", i), "must be delivered, clicked, opened or read, each once"))
			}
		}
		if len(r.To) == 0 || len(r.To) >= len(Channels) {
			errs = append(errs, fe("escalation.to", fmt.Sprintf("must name 1 to %d channels, leaving one to send first", len(Channels)-1)))
		}
		for i, ch := range r.To {
			if !ch.Valid() || slices.Index(r.To, ch) != i {
				errs = append(errs, fe(fmt.Sprintf("escalation.to[%d]", i), "an unknown channel, or one named twice"))
			}
		}
	}
	return errs
}
