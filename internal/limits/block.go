package limits

import (
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// MaxBlockDuration bounds an emergency block.
const MaxBlockDuration = 365 * 24 * time.Hour

// MaxDomainBytes bounds a block's Envoy domain.
const MaxDomainBytes = 255

// Block refuses every check of Key (under Policy, or under every policy when
// Policy is empty) until ExpiresAt, whatever the counters say. Blocks are
// emergency measures, enforced by every node within a second.
//
// A block whose Key is written entry_key=entry_value (see [Block.Entry])
// and that names no Policy also refuses every Envoy rate limit request
// carrying that descriptor entry: in Domain, or in every domain when
// Domain is empty. A block with a Domain is for Envoy only (HTTP checks
// have no domain); it names no Policy, and its Key is an entry.
type Block struct {
	Key       string
	Policy    string // empty: every policy
	Domain    string // Envoy only; empty: every domain (and the HTTP API)
	Reason    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Active reports whether b is in force at now.
func (b Block) Active(now time.Time) bool { return now.Before(b.ExpiresAt) }

// Applies reports whether b covers key under policy, for the HTTP API.
func (b Block) Applies(key, policy string) bool {
	return b.Domain == "" && b.Key == key && (b.Policy == "" || b.Policy == policy)
}

// Entry splits a Key written entry_key=entry_value (both non-empty; the
// entry key has no "=") into the Envoy descriptor entry it blocks. ok is
// false for other keys, and for blocks under one policy, which Envoy
// requests (having no named policies) never match.
func (b Block) Entry() (key, value string, ok bool) {
	if b.Policy != "" {
		return "", "", false
	}
	return entryOf(b.Key)
}

func entryOf(s string) (key, value string, ok bool) {
	key, value, ok = strings.Cut(s, "=")
	return key, value, ok && key != "" && value != ""
}

// AppliesToEntry reports whether b refuses Envoy requests in domain that
// carry the descriptor entry key=value.
func (b Block) AppliesToEntry(domain, key, value string) bool {
	k, v, ok := b.Entry()
	return ok && k == key && v == value && (b.Domain == "" || b.Domain == domain)
}

// BlockRequest asks for a block of Key for Duration.
type BlockRequest struct {
	Key      string
	Policy   string
	Domain   string
	Duration time.Duration
	Reason   string
}

// Validate names every bad field in an apperr Unprocessable error. A
// Domain needs a Key written entry_key=entry_value and no Policy.
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
	if r.Domain != "" {
		if len(r.Domain) > MaxDomainBytes {
			fe = append(fe, apperr.FieldError{Field: "domain", Detail: "must be at most 255 bytes"})
		}
		if _, _, ok := entryOf(r.Key); !ok && r.Key != "" {
			fe = append(fe, apperr.FieldError{Field: "domain",
				Detail: "blocks Envoy descriptor entries only: the key must be written entry_key=entry_value, e.g. remote_address=203.0.113.9"})
		}
		if r.Policy != "" {
			fe = append(fe, apperr.FieldError{Field: "policy",
				Detail: "cannot be combined with domain: Envoy requests have no policies"})
		}
	}
	if r.Duration < time.Second || r.Duration > MaxBlockDuration {
		fe = append(fe, apperr.FieldError{Field: "duration", Detail: "must be between 1s and 365d"})
	}
	if len(r.Reason) > 1024 {
		fe = append(fe, apperr.FieldError{Field: "reason", Detail: "must be at most 1024 bytes"})
	}
	return apperr.Fields(apperr.Unprocessable, "the block is invalid", fe)
}
