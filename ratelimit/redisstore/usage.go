package redisstore

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/ratelimit"
)

// Usage reservations and after-the-fact charges: see the package doc,
// "Usage reservations".

//go:embed usage.lua
var usageMain string

// usageSource is the usage script: ratelimit.lua's prelude (the clock and
// the arithmetic, up to its policies), its general path's functions (from
// load up to the general path's loop), then usage.lua. The fast section
// between them is ratelimit.lua's alone.
var usageSource = func() string {
	cut := func(mark string, from int) int {
		i := strings.Index(scriptSource[from:], mark)
		if i < 0 {
			panic("redisstore: ratelimit.lua has no marker " + strconv.Quote(mark))
		}
		return from + i
	}
	prelude := cut("\nlocal policies = {}\n", 0)
	helpers := cut("\nlocal function load(", prelude)
	loop := cut("\nfor _ = 1, nops do\n", helpers)
	return scriptSource[:prelude+1] + scriptSource[helpers+1:loop+1] + usageMain
}()

var usageSHA = func() string {
	sum := sha1.Sum([]byte(usageSource))
	return hex.EncodeToString(sum[:])
}()

var _ ratelimit.UsageStore = (*Store)(nil)

// ErrCrossSlot is returned by Hold and Charge on a Cluster for checks in
// several slots. It wraps ratelimit.ErrInvalidUsage: the request cannot
// be served as it is, on this server.
var ErrCrossSlot = fmt.Errorf("%w: redisstore: a reservation's keys must share one Cluster slot (set Options.HashTag)", ratelimit.ErrInvalidUsage)

// usageCheck is a reserved check as recorded.
type usageCheck struct {
	Name    string `json:"n"`
	Alg     string `json:"a"`
	Limit   int64  `json:"l"`
	Period  int64  `json:"p"`
	Burst   int64  `json:"b"`
	MaxDebt int64  `json:"d,omitempty"`
	Key     string `json:"k"`
	Cost    int64  `json:"c"`
	ID      string `json:"x,omitempty"`
	Fixed   bool   `json:"f,omitempty"`
}

type usageRecord struct {
	Mode   string       `json:"m"`
	Checks []usageCheck `json:"c"`
	Owner  string       `json:"o,omitempty"`
}

// counterKeys returns the sorted sets counting the unsettled
// reservations of rec's keys, one per check, in its key's slot. The names
// hash what they count, so no key a check names can be one of them. The
// owner's set is apart (owners.go).
func (s *Store) counterKeys(rec usageRecord) []string {
	out := make([]string, len(rec.Checks))
	for i, u := range rec.Checks {
		out[i] = s.prefix + "{" + tagOf(s.keyName(u.policy(), u.Key)) + "}:holds:" + digest(u.Name+"\x00"+u.Key)
	}
	return out
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

func (u usageCheck) policy() *ratelimit.Policy {
	return &ratelimit.Policy{Name: u.Name, Algorithm: ratelimit.Algorithm(u.Alg), Limit: u.Limit,
		Period: time.Duration(u.Period) * time.Microsecond, Burst: u.Burst, MaxDebt: u.MaxDebt}
}

func (u usageCheck) args() []string {
	fixed := "0"
	if u.Fixed {
		fixed = "1"
	}
	return []string{algCode(ratelimit.Algorithm(u.Alg)), strconv.FormatInt(u.Limit, 10), strconv.FormatInt(u.Period, 10),
		strconv.FormatInt(u.Burst, 10), strconv.FormatInt(u.MaxDebt, 10), strconv.FormatInt(u.Cost, 10), u.ID, fixed}
}

func (s *Store) toUsage(c ratelimit.Check, id string) usageCheck {
	p := c.Policy
	u := usageCheck{Name: p.Name, Alg: string(p.Algorithm), Limit: p.Limit, Period: int64(p.Period / time.Microsecond),
		Burst: p.Burst, MaxDebt: p.MaxDebt, Key: c.Key, Cost: c.Cost, Fixed: c.Fixed}
	if p.Algorithm == ratelimit.SlidingWindowLog || p.Algorithm == ratelimit.Concurrency {
		u.ID = id
	}
	return u
}

func (s *Store) nowArg() string {
	if s.now == nil {
		return ""
	}
	return strconv.FormatInt(max(0, s.now().UnixMicro()), 10)
}

// tag returns the hash tag of a key name.
func tagOf(name string) string {
	i, j := strings.IndexByte(name, '{'), strings.IndexByte(name, '}')
	return name[i+1 : j]
}

// recordKey returns the key of reservation id, which validID accepts; on
// a Cluster the id ends in ~ and its slot's hash tag.
func (s *Store) recordKey(id string) string {
	if rid, t, ok := strings.Cut(id, "~"); ok {
		b, _ := base64.RawURLEncoding.DecodeString(t)
		return s.prefix + "{" + string(b) + "}:res:" + rid
	}
	return s.prefix + "{res:" + id + "}"
}

func (s *Store) evalUsage(ctx context.Context, keys, args []string) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	res := s.client.Do(ctx, s.client.B().Evalsha().Sha1(usageSHA).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if err, ok := rueidis.IsRedisErr(res.Error()); ok && err.IsNoScript() {
		res = s.client.Do(ctx, s.client.B().Eval().Script(usageSource).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	if err := res.Error(); err != nil {
		return nil, classify(err)
	}
	vals, err := res.AsIntSlice()
	if err != nil || len(vals) < 2 {
		return nil, fmt.Errorf("redisstore: usage script reply %v: %w", vals, err)
	}
	return vals, nil
}

func decisions(checks []ratelimit.Check, vals []int64) ([]ratelimit.Decision, error) {
	if len(vals) != 2+4*len(checks) {
		return nil, fmt.Errorf("redisstore: usage script replied %d numbers, want %d", len(vals), 2+4*len(checks))
	}
	out := make([]ratelimit.Decision, len(checks))
	for i, c := range checks {
		r := vals[2+4*i:]
		out[i] = ratelimit.Decision{Allowed: r[0] == 1, Limit: c.Policy.Capacity(), Remaining: max(0, r[1]),
			RetryAfter: time.Duration(r[2]) * time.Microsecond, ResetAfter: time.Duration(r[3]) * time.Microsecond}
	}
	return out, nil
}

// Charge implements ratelimit.UsageStore.
func (s *Store) Charge(ctx context.Context, checks []ratelimit.Check) ([]ratelimit.Decision, error) {
	if err := ratelimit.ValidateUsage(checks, ratelimit.UsageOptions{}, ratelimit.ChargeCall); err != nil {
		return nil, err
	}
	keys := make([]string, len(checks))
	args := []string{s.nowArg(), "g", strconv.Itoa(len(checks))}
	for i, c := range checks {
		keys[i] = s.keyName(c.Policy, c.Key)
		args = append(args, s.toUsage(c, s.newLease()).args()...)
	}
	if err := s.oneSlot(keys); err != nil {
		return nil, err
	}
	vals, err := s.evalUsage(ctx, keys, args)
	if err != nil {
		return nil, err
	}
	return decisions(checks, vals)
}

func (s *Store) oneSlot(keys []string) error {
	for _, k := range keys[1:] {
		if s.slot(k) != s.slot(keys[0]) {
			return ErrCrossSlot
		}
	}
	return nil
}

// Hold implements ratelimit.UsageStore.
func (s *Store) Hold(ctx context.Context, id string, checks []ratelimit.Check, opts ratelimit.UsageOptions) (ratelimit.Hold, error) {
	if err := ratelimit.ValidateUsage(checks, opts, ratelimit.HoldCall); err != nil {
		return ratelimit.Hold{}, err
	}
	if !plainID(id) {
		return ratelimit.Hold{}, fmt.Errorf("%w: redisstore: a reservation id is 1 to %d letters, digits, '-' or '_'", ratelimit.ErrInvalidUsage, maxIDBytes)
	}
	rec := usageRecord{Mode: "n", Checks: make([]usageCheck, len(checks)), Owner: opts.Owner}
	if opts.Charge == ratelimit.ChargeOnSettle {
		rec.Mode = "s"
	}
	keys := make([]string, 1, 1+len(checks))
	for i, c := range checks {
		rec.Checks[i] = s.toUsage(c, id)
		keys = append(keys, s.keyName(c.Policy, c.Key))
	}
	if s.cluster {
		id += "~" + base64.RawURLEncoding.EncodeToString([]byte(tagOf(keys[1])))
	}
	keys[0] = s.recordKey(id)
	if err := s.oneSlot(keys); err != nil {
		return ratelimit.Hold{}, err
	}
	js, _ := json.Marshal(rec)
	ttl := micros(opts.ReservationTTL())
	args := []string{s.nowArg(), "h", rec.Mode, strconv.FormatInt(ttl, 10), string(js), strconv.Itoa(len(checks))}
	for _, u := range rec.Checks {
		args = append(args, u.args()...)
	}
	cks := s.counterKeys(rec)
	perKey, perOwner := opts.HoldBounds()
	args = append(args, strconv.Itoa(len(cks)))
	for range cks {
		args = append(args, strconv.Itoa(perKey))
	}
	if err := s.admitOwner(ctx, rec.Owner, keys[0], perOwner, ttl); err != nil {
		return ratelimit.Hold{}, err
	}
	vals, err := s.evalUsage(ctx, append(keys, cks...), args)
	if err != nil || vals[1] != 1 {
		s.releaseOwner(ctx, rec.Owner, keys[0])
	}
	if err != nil {
		return ratelimit.Hold{}, err
	}
	if vals[1] == 4 {
		return ratelimit.Hold{}, fmt.Errorf("%w: a key is at its bound of %d", ratelimit.ErrTooManyHolds, perKey)
	}
	ds, err := decisions(checks, vals)
	if err != nil {
		return ratelimit.Hold{}, err
	}
	if vals[1] != 1 {
		return ratelimit.Hold{Decisions: ds}, nil
	}
	return ratelimit.Hold{ID: id, Allowed: true, Decisions: ds, ExpiresAt: time.UnixMicro(vals[0] + ttl).UTC()}, nil
}

// Settle implements ratelimit.UsageStore. It reads the reservation, then
// settles it in one script call that first checks it is still the one
// read and unsettled.
func (s *Store) Settle(ctx context.Context, id string, cost int64) (ratelimit.Settlement, error) {
	if cost < 0 || cost >= 1<<53 {
		return ratelimit.Settlement{}, fmt.Errorf("%w: cost %d", ratelimit.ErrInvalidUsage, cost)
	}
	if !s.validID(id) {
		return ratelimit.Settlement{}, fmt.Errorf("%w: not an id this store issues", ratelimit.ErrReservationNotFound)
	}
	key := s.recordKey(id)
	notFound := fmt.Errorf("%w: %q", ratelimit.ErrReservationNotFound, id)
	ctx2, cancel := context.WithTimeout(ctx, s.timeout)
	v, err := s.client.Do(ctx2, s.client.B().Get().Key(key).Build()).ToString()
	cancel()
	switch {
	case rueidis.IsRedisNil(err):
		return ratelimit.Settlement{}, notFound
	case err != nil:
		return ratelimit.Settlement{}, classify(err)
	case v == "settled":
		return ratelimit.Settlement{Already: true}, nil
	}
	js, at, exp, ok := splitRecord(v)
	var rec usageRecord
	if !ok || json.Unmarshal([]byte(js), &rec) != nil {
		return ratelimit.Settlement{}, fmt.Errorf("redisstore: reservation %q is unreadable", id)
	}
	keys := []string{key}
	args := []string{s.nowArg(), "s", v, strconv.FormatInt(cost, 10), rec.Mode, at, exp, strconv.Itoa(len(rec.Checks))}
	for _, u := range rec.Checks {
		keys = append(keys, s.keyName(u.policy(), u.Key))
		args = append(args, u.args()...)
	}
	cks := s.counterKeys(rec)
	args = append(args, strconv.Itoa(len(cks)))
	vals, err := s.evalUsage(ctx, append(keys, cks...), args)
	if err != nil {
		return ratelimit.Settlement{}, err
	}
	if vals[1] != 3 {
		s.releaseOwner(ctx, rec.Owner, key)
	}
	switch vals[1] {
	case 1:
		return ratelimit.Settlement{}, nil
	case 3:
		return ratelimit.Settlement{Already: true}, nil
	}
	return ratelimit.Settlement{}, notFound
}

// splitRecord splits a stored reservation into its record, the instant it
// was taken and its expiry.
func splitRecord(v string) (js, at, exp string, ok bool) {
	i := strings.LastIndexByte(v, '|')
	if i < 0 {
		return "", "", "", false
	}
	j := strings.LastIndexByte(v[:i], '|')
	if j < 0 {
		return "", "", "", false
	}
	return v[:j], v[j+1 : i], v[i+1:], true
}
