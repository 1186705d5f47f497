package limits_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/limits"
)

// TestEntryBlocked: blocks of keys written entry_key=entry_value refuse
// Envoy entries in their domain (every domain without one); blocks under
// a policy and other keys never do, and a domain block never refuses an
// HTTP check.
func TestEntryBlocked(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	for _, req := range []limits.BlockRequest{
		{Key: "remote_address=203.0.113.9", Domain: "edge", Duration: time.Hour},
		{Key: "remote_address=203.0.113.9", Duration: time.Minute}, // every domain, shorter
		{Key: "user=ann", Domain: "edge", Duration: time.Minute},
		{Key: "user=bob", Policy: "free", Duration: time.Minute}, // HTTP only
		{Key: "plain", Duration: time.Minute},
		{Key: "path=/a=b", Duration: time.Minute}, // the value may hold "="
	} {
		if _, err := b.svc.BlockKey(ctx, req); err != nil {
			t.Fatalf("BlockKey(%+v): %v", req, err)
		}
	}
	now := b.clock.Now()
	tests := []struct {
		name, domain, key, value string
		until                    time.Duration // 0: not blocked
	}{
		{"domain block, latest expiry", "edge", "remote_address", "203.0.113.9", time.Hour},
		{"every-domain block", "api", "remote_address", "203.0.113.9", time.Minute},
		{"other value", "edge", "remote_address", "203.0.113.10", 0},
		{"domain block, other domain", "api", "user", "ann", 0},
		{"domain block, its domain", "edge", "user", "ann", time.Minute},
		{"block under a policy", "edge", "user", "bob", 0},
		{"not an entry", "edge", "plain", "", 0},
		{"value with =", "edge", "path", "/a=b", time.Minute},
	}
	for _, tt := range tests {
		until, ok := b.rules.EntryBlocked(tt.domain, tt.key, tt.value, now)
		if ok != (tt.until != 0) || (ok && !until.Equal(now.Add(tt.until))) {
			t.Errorf("%s: EntryBlocked(%s, %s=%s) = %v, %v; want blocked for %v", tt.name, tt.domain, tt.key, tt.value, until, ok, tt.until)
		}
	}
	if _, ok := b.rules.EntryBlocked("edge", "remote_address", "203.0.113.9", now.Add(2*time.Hour)); ok {
		t.Error("EntryBlocked after every block expired = true")
	}
	if ok, rs := b.check(t, one("free", "user=ann")); !ok || rs[0].DecidedBy != limits.ByRule {
		t.Errorf("HTTP check of a key blocked in an Envoy domain = %v %+v, want allowed by the rule", ok, rs[0])
	}
	if ok, _ := b.check(t, one("free", "remote_address=203.0.113.9")); ok {
		t.Error("HTTP check of a key blocked without domain admitted")
	}
}

func TestBlockRequestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		req   limits.BlockRequest
		field string // "": valid
	}{
		{"entry in a domain", limits.BlockRequest{Key: "remote_address=203.0.113.9", Domain: "edge", Duration: time.Minute}, ""},
		{"domain without entry", limits.BlockRequest{Key: "203.0.113.9", Domain: "edge", Duration: time.Minute}, "domain"},
		{"domain, empty entry key", limits.BlockRequest{Key: "=203.0.113.9", Domain: "edge", Duration: time.Minute}, "domain"},
		{"domain and policy", limits.BlockRequest{Key: "a=b", Domain: "edge", Policy: "free", Duration: time.Minute}, "policy"},
		{"domain too long", limits.BlockRequest{Key: "a=b", Domain: string(make([]byte, 256)), Duration: time.Minute}, "domain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if tt.field == "" {
				if err != nil {
					t.Errorf("Validate = %v, want valid", err)
				}
				return
			}
			ae, ok := errors.AsType[*apperr.Error](err)
			if !ok || ae.Code != apperr.Unprocessable || len(ae.Fields) != 1 || ae.Fields[0].Field != tt.field {
				t.Errorf("Validate = %v, want Unprocessable naming %s alone", err, tt.field)
			}
		})
	}
}
