package notify

import (
	"time"
)

// RetryRule is how one category retries temporary failures: the wait
// before attempt n+1 (n attempts made) is a random duration in
// [0, min(Cap, Base * 2^(n-1))] (exponential backoff with full jitter), and
// at most Attempts attempts are made in all. Attempts 0 means no limit but
// the notification's expiry (or MaxAge when it has none).
type RetryRule struct {
	Base     time.Duration
	Cap      time.Duration
	Attempts int
	// MaxAge bounds retries of a notification without expires_at when
	// Attempts is 0. If zero, one hour.
	MaxAge time.Duration
	// DeadLetter decides where an exhausted or permanently failed delivery
	// goes: dead letters (status dead) when true, dropped (status failed)
	// when false.
	DeadLetter bool
}

// DefaultRetryRules returns each category's rule, as docs/notifications.md
// lists them: critical retries quickly until it expires, orders back off
// for 5 attempts then dead-letter, marketing retries at most once then is
// dropped.
func DefaultRetryRules() map[Category]RetryRule {
	return map[Category]RetryRule{
		Critical:  {Base: 250 * time.Millisecond, Cap: 5 * time.Second, Attempts: 0, MaxAge: time.Hour, DeadLetter: true},
		Orders:    {Base: time.Second, Cap: 5 * time.Minute, Attempts: 5, DeadLetter: true},
		Marketing: {Base: 5 * time.Second, Cap: time.Minute, Attempts: 2, DeadLetter: false},
	}
}

// Backoff returns the wait after the attempts-th failed attempt (attempts >=
// 1): rand() * min(Cap, Base * 2^(attempts-1)), rand() being in [0, 1).
func (r RetryRule) Backoff(attempts int, rand func() float64) time.Duration {
	ceiling := r.Cap
	if attempts < 1 {
		attempts = 1
	}
	if attempts <= 62 {
		if d := r.Base << (attempts - 1); d > 0 && d>>(attempts-1) == r.Base && (r.Cap <= 0 || d < r.Cap) {
			ceiling = d
		}
	}
	if ceiling <= 0 {
		return 0
	}
	return time.Duration(rand() * float64(ceiling))
}

// Outcome is what the worker records after an attempt.
type Outcome struct {
	Status        Status
	NextAttemptAt time.Time // set when Status is queued (a retry)
	DeadLetter    bool      // Status is dead
}

// decide applies the rule to an attempt that failed with a temporary error
// (permanent false) or a permanent one, attempts being the attempts made
// including this one. retryAfter is the provider's hint (zero if none).
func (r RetryRule) decide(now time.Time, created, expires time.Time, attempts int, permanent bool,
	retryAfter time.Duration, rand func() float64) Outcome {
	giveUp := func() Outcome {
		if r.DeadLetter {
			return Outcome{Status: StatusDead, DeadLetter: true}
		}
		return Outcome{Status: StatusFailed}
	}
	if permanent || (r.Attempts > 0 && attempts >= r.Attempts) {
		return giveUp()
	}
	wait := max(r.Backoff(attempts, rand), retryAfter)
	next := now.Add(wait)
	deadline := expires
	if r.Attempts == 0 && deadline.IsZero() {
		maxAge := r.MaxAge
		if maxAge <= 0 {
			maxAge = time.Hour
		}
		deadline = created.Add(maxAge)
	}
	if !deadline.IsZero() && !next.Before(deadline) {
		if !expires.IsZero() {
			return Outcome{Status: StatusExpired}
		}
		return giveUp()
	}
	return Outcome{Status: StatusQueued, NextAttemptAt: next}
}
