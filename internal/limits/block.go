package limits

import (
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// MaxBlockDuration bounds an emergency block.
const MaxBlockDuration = 365 * 24 * time.Hour

// Block refuses every check of Key (under Policy, or under every policy when
// Policy is empty) until ExpiresAt, whatever the counters say. Blocks are
// emergency measures, enforced by every node within a second.
type Block struct {
	Key       string
	Policy    string // empty: every policy
	Reason    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Active reports whether b is in force at now.
func (b Block) Active(now time.Time) bool { return now.Before(b.ExpiresAt) }

// Applies reports whether b covers key under policy.
func (b Block) Applies(key, policy string) bool {
	return b.Key == key && (b.Policy == "" || b.Policy == policy)
}

// BlockRequest asks for a block of Key for Duration.
type BlockRequest struct {
	Key      string
	Policy   string
	Duration time.Duration
	Reason   string
}

// Validate names every bad field in an apperr Unprocessable error.
func (r BlockRequest) Validate() error {
	var fe []apperr.FieldError
	if r.Key == "" {
		fe = append(fe, apperr.FieldError{Field: "key", Detail: "is required"})
	} else if len(r.Key) > MaxKeyBytes {
		fe = append(fe, apperr.FieldError{Field: "key", Detail: "must be at most 1024 bytes"})
	}
	if r.Policy != "" && !ValidName(r.Policy) {
		fe = append(fe, apperr.FieldError{Field: "policy", Detail: "is not a valid policy name"})
	}
	if r.Duration < time.Second || r.Duration > MaxBlockDuration {
		fe = append(fe, apperr.FieldError{Field: "duration", Detail: "must be between 1s and 365d"})
	}
	if len(r.Reason) > 1024 {
		fe = append(fe, apperr.FieldError{Field: "reason", Detail: "must be at most 1024 bytes"})
	}
	return apperr.Fields(apperr.Unprocessable, "the block is invalid", fe)
}
