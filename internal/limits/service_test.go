package limits_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/limits"
	"github.com/sluicehq/sluice/ratelimit"
)

func TestDefaultsAreServed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, want := range []struct {
		name string
		n    int64
	}{{"free", 60}, {"paid", 600}, {"enterprise", 6000}} {
		p, src, err := b.svc.Policy(want.name)
		if err != nil || src != limits.FromDatabase || p.Limit != want.n || p.Burst != want.n ||
			p.Algorithm != ratelimit.TokenBucket || time.Duration(p.Period) != time.Minute {
			t.Errorf("Policy(%s) = %+v, %s, %v; want a %d/min token bucket with a one-minute burst", want.name, p, src, err, want.n)
		}
	}
	for i := range 60 {
		if ok, rs := b.check(t, one("free", "api_key:abc")); !ok || rs[0].Remaining != int64(59-i) {
			t.Fatalf("check %d of free = %v %+v, want allowed with %d left", i+1, ok, rs[0], 59-i)
		}
	}
	ok, rs := b.check(t, one("free", "api_key:abc"))
	if ok || rs[0].RetryAfter != time.Second || rs[0].DecidedBy != limits.ByRule {
		t.Errorf("61st check of free = %v %+v, want refused by the rule, retry after 1s", ok, rs[0])
	}
}

func TestCheckRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	long := strings.Repeat("k", limits.MaxKeyBytes+1)
	tests := []struct {
		name  string
		reqs  []limits.CheckRequest
		code  apperr.Code
		field string
	}{
		{"no checks", nil, apperr.Invalid, ""},
		{"unknown policy", []limits.CheckRequest{one("nope", "k")}, apperr.NotFound, ""},
		{"key over 1 KiB", []limits.CheckRequest{one("free", long)}, apperr.Invalid, "key"},
		{"empty key", []limits.CheckRequest{one("free", "")}, apperr.Invalid, "key"},
		{"zero cost", []limits.CheckRequest{{Policy: "free", Key: "k", Cost: 0}}, apperr.Invalid, "cost"},
		{"negative cost", []limits.CheckRequest{{Policy: "free", Key: "k", Cost: -3}}, apperr.Invalid, "cost"},
		{"cost above the burst", []limits.CheckRequest{{Policy: "free", Key: "k", Cost: 61}}, apperr.Invalid, "cost"},
		{"duplicate check", []limits.CheckRequest{one("free", "k"), one("free", "k")}, apperr.Invalid, "checks[1].key"},
		{"bad one of several", []limits.CheckRequest{one("free", "k"), {Policy: "paid", Key: "k", Cost: 0}}, apperr.Invalid, "checks[1].cost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := b.svc.Check(t.Context(), tt.reqs)
			if !apperr.Is(err, tt.code) {
				t.Fatalf("Check = %v, want %s", err, tt.code)
			}
			if tt.field != "" {
				ae, _ := err.(*apperr.Error)
				if ae == nil || len(ae.Fields) == 0 || ae.Fields[0].Field != tt.field {
					t.Errorf("Check error fields = %+v, want %q named", ae, tt.field)
				}
			}
		})
	}
	// Nothing was charged by the refused requests.
	if r, err := b.svc.Peek(t.Context(), "free", "k"); err != nil || r.Remaining != 60 {
		t.Errorf("after invalid checks, free/k = %+v, %v; want untouched (60 left)", r, err)
	}
}

func TestMultiKeyIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.put(t, perMinute("login_ip", ratelimit.FixedWindow, 10))
	b.put(t, perMinute("login_account", ratelimit.FixedWindow, 3))
	login := func(ip, account string) (bool, []limits.Result) {
		return b.check(t, one("login_ip", ip), one("login_account", account))
	}
	for i := range 3 {
		if ok, _ := login("203.0.113.9", "ann"); !ok {
			t.Fatalf("login %d refused, want allowed", i+1)
		}
	}
	ok, rs := login("198.51.100.7", "ann") // another IP, same account
	if ok || !rs[0].Allowed || rs[1].Allowed {
		t.Fatalf("4th login on ann = %v %+v, want refused by the account check only", ok, rs)
	}
	if r, _ := b.svc.Peek(t.Context(), "login_ip", "198.51.100.7"); r.Remaining != 10 {
		t.Errorf("the refused login charged its IP: %d left, want 10", r.Remaining)
	}
	if ok, _ := login("203.0.113.9", "bob"); !ok { // the office NAT is not locked out
		t.Errorf("login on another account from the same IP refused, want allowed")
	}
}

func TestModes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	soft := perMinute("soft", ratelimit.TokenBucket, 3)
	soft.Mode, soft.BurstOver = limits.Soft, 2
	shadow := perMinute("shadow", ratelimit.SlidingWindowLog, 2)
	shadow.Mode = limits.Shadow
	b.put(t, soft)
	b.put(t, shadow)

	type want struct {
		allowed, wouldRefuse bool
		remaining            int64
	}
	tests := []struct {
		policy string
		wants  []want
	}{
		{"soft", []want{{true, false, 2}, {true, false, 1}, {true, false, 0}, {true, true, 0}, {true, true, 0}, {false, false, 0}}},
		{"shadow", []want{{true, false, 1}, {true, false, 0}, {true, true, 0}, {true, true, 0}}},
	}
	for _, tt := range tests {
		for i, w := range tt.wants {
			ok, rs := b.check(t, one(tt.policy, "k"))
			r := rs[0]
			if ok != w.allowed || r.Allowed != w.allowed || r.WouldRefuse != w.wouldRefuse || r.Remaining != w.remaining || r.Limit != 3-btoi(tt.policy == "shadow") {
				t.Errorf("%s check %d = %v %+v, want allowed %v, would_refuse %v, remaining %d", tt.policy, i+1, ok, r, w.allowed, w.wouldRefuse, w.remaining)
			}
		}
	}
	// A shadow check does not charge when the request is refused by a hard one.
	b.put(t, perMinute("one", ratelimit.FixedWindow, 1))
	b.check(t, one("one", "x"))
	if ok, _ := b.check(t, one("one", "x"), one("shadow", "x")); ok {
		t.Fatal("hard limit exhausted but the request was allowed")
	}
	if r, _ := b.svc.Peek(t.Context(), "shadow", "x"); r.Remaining != 2 {
		t.Errorf("shadow policy charged for a refused request: %d left, want 2", r.Remaining)
	}
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func TestBlocks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := t.Context()
	if _, err := b.svc.BlockKey(ctx, limits.BlockRequest{Key: "ip:1", Duration: time.Hour, Reason: "abuse"}); err != nil {
		t.Fatalf("BlockKey: %v", err)
	}
	if _, err := b.svc.BlockKey(ctx, limits.BlockRequest{Key: "ip:2", Policy: "paid", Duration: 90 * time.Second}); err != nil {
		t.Fatalf("BlockKey: %v", err)
	}
	tests := []struct {
		policy, key string
		blocked     bool
		retry       time.Duration
	}{
		{"free", "ip:1", true, time.Hour},
		{"paid", "ip:1", true, time.Hour},
		{"paid", "ip:2", true, 90 * time.Second},
		{"free", "ip:2", false, 0},
		{"free", "ip:3", false, 0},
	}
	for _, tt := range tests {
		ok, rs := b.check(t, one(tt.policy, tt.key))
		if ok == tt.blocked || (rs[0].DecidedBy == limits.ByBlock) != tt.blocked || rs[0].RetryAfter != tt.retry {
			t.Errorf("check %s/%s = %v %+v, want blocked %v, retry after %v", tt.policy, tt.key, ok, rs[0], tt.blocked, tt.retry)
		}
		st, err := b.svc.Peek(ctx, tt.policy, tt.key)
		if err != nil || (st.DecidedBy == limits.ByBlock) != tt.blocked {
			t.Errorf("Peek %s/%s = %+v, %v; want decided by block %v", tt.policy, tt.key, st, err, tt.blocked)
		}
	}
	if r, _ := b.svc.Peek(ctx, "free", "ip:1"); r.Remaining != 60 {
		t.Errorf("a blocked check was charged: %d left, want 60", r.Remaining)
	}
	b.clock.Advance(90 * time.Second)
	if ok, _ := b.check(t, one("paid", "ip:2")); !ok {
		t.Error("check after the block expired refused, want allowed")
	}
	if err := b.svc.Unblock(ctx, "ip:1", nil, nil); err != nil {
		t.Fatalf("Unblock: %v", err)
	}
	if ok, _ := b.check(t, one("free", "ip:1")); !ok {
		t.Error("check after Unblock refused, want allowed")
	}
	if err := b.svc.Unblock(ctx, "ip:1", nil, nil); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("Unblock of an unblocked key = %v, want NotFound", err)
	}
	if bs := b.svc.Blocks(); len(bs) != 0 {
		t.Errorf("Blocks = %+v, want none in force", bs)
	}
}

func TestConfigPoliciesHideAndResistTheAPI(t *testing.T) {
	t.Parallel()
	fixed := perMinute("free", ratelimit.FixedWindow, 5)
	b := setup(t, setupOpts{config: []limits.NamedPolicy{fixed}})
	p, src, err := b.svc.Policy("free")
	if err != nil || src != limits.FromConfig || p.Limit != 5 {
		t.Fatalf("Policy(free) = %+v %s %v, want the configured one", p, src, err)
	}
	if _, err := b.svc.PutPolicy(t.Context(), perMinute("free", ratelimit.GCRA, 9)); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("PutPolicy over a configured policy = %v, want Conflict", err)
	}
	if err := b.svc.DeletePolicy(t.Context(), "free"); !apperr.Is(err, apperr.Conflict) {
		t.Errorf("DeletePolicy of a configured policy = %v, want Conflict", err)
	}
}

func TestPolicyChangesApplyAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.put(t, perMinute("p", ratelimit.FixedWindow, 1))
	b.check(t, one("p", "k"))
	if ok, _ := b.check(t, one("p", "k")); ok {
		t.Fatal("second check of a 1/min policy allowed")
	}
	b.put(t, perMinute("p", ratelimit.FixedWindow, 5))
	if ok, rs := b.check(t, one("p", "k")); !ok || rs[0].Remaining != 3 {
		t.Errorf("after raising the limit to 5: %v %+v, want allowed with the count kept (3 left)", ok, rs)
	}
	if err := b.svc.DeletePolicy(t.Context(), "p"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.svc.Check(t.Context(), []limits.CheckRequest{one("p", "k")}); !apperr.Is(err, apperr.NotFound) {
		t.Errorf("check of a deleted policy = %v, want NotFound", err)
	}
}
