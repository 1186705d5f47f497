package limits

import "time"

// Metrics receives what the rate limiter observes, for metrics: build one
// (an adapter binds its fields to its series, see package
// internal/metrics) and share it between the Service and the Failover
// store. A nil *Metrics, or a nil field, records nothing. The functions are
// called concurrently, on the check path, so they must be cheap.
type Metrics struct {
	// Checked is told every check decided, by policy, and its result:
	// "allowed", "refused", "blocked" or "charged" (an after-the-fact
	// charge, never refused). Shadow-mode refusals count as
	// allowed.
	Checked func(policy, result string)
	// WouldRefuse is told every check allowed by a soft or shadow policy
	// that its hard form would have refused, with the policy's mode.
	WouldRefuse func(policy string, mode Mode)
	// FellBack is told every check decided while the shared store was
	// unreachable, and how: FailOpen (a local limiter) or FailClosed
	// (refused).
	FellBack func(policy string, how Failure)
	// Took is told how long each check took to decide, store round trip
	// included; policy is "multi" for multi-key checks.
	Took func(policy string, d time.Duration)
	// StoreUp is told whether the shared store answers: true when a
	// Failover store is built and whenever its store answers again, false
	// when the store becomes unreachable.
	StoreUp func(up bool)
	// SyncedOver is told, at each LocalSync sync, how many of the checks a
	// node admitted on its own found no room left in the shared store: the
	// local mode's admissions over the limit.
	SyncedOver func(policy string, n int64)
}

// Check outcomes, the values of Metrics.Checked's result.
const (
	resultAllowed = "allowed"
	resultRefused = "refused"
	resultBlocked = "blocked"
	resultCharged = "charged"
)

func (m *Metrics) decided(policy, result string) {
	if m != nil && m.Checked != nil {
		m.Checked(policy, result)
	}
}

func (m *Metrics) wouldHaveRefused(policy string, mode Mode) {
	if m != nil && m.WouldRefuse != nil {
		m.WouldRefuse(policy, mode)
	}
}

func (m *Metrics) fellBack(policy string, how Failure) {
	if m != nil && m.FellBack != nil {
		m.FellBack(policy, how)
	}
}

func (m *Metrics) syncedOver(policy string, n int64) {
	if m != nil && m.SyncedOver != nil && n > 0 {
		m.SyncedOver(policy, n)
	}
}

func (m *Metrics) took(policy string, d time.Duration) {
	if m != nil && m.Took != nil {
		m.Took(policy, d)
	}
}

func (m *Metrics) setStoreUp(up bool) {
	if m != nil && m.StoreUp != nil {
		m.StoreUp(up)
	}
}
