package guard

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/phone"
	"github.com/sluicehq/sluice/ratelimit"
)

// SMS-pumping guard refusal reasons: the label of the refusal metric and
// the start of the 422's detail.
const (
	SMSNumberInvalid     = "number_invalid"
	SMSCountryNotAllowed = "country_not_allowed"
	SMSNumberType        = "number_type"
	SMSPrefixVelocity    = "prefix_velocity"
	SMSUserVelocity      = "user_velocity"
)

// logKeyError is the attribute key of an error in log records.
const logKeyError = "error"

// SMSReasons lists every refusal reason.
var SMSReasons = []string{SMSNumberInvalid, SMSCountryNotAllowed, SMSNumberType, SMSPrefixVelocity, SMSUserVelocity}

// SMS checks an SMS destination before a notification is saved, to
// stop SMS pumping (toll fraud: bots triggering messages, typically OTPs,
// to numbers whose operator shares the fee with them). A request whose
// SMS it refuses is refused whole, with a 422 naming the reason: nothing
// is stored and nothing queued. Build it with [NewSMS]; it is safe
// for concurrent use.
//
// The checks run in this order, the cheap and certain first, so a refusal
// by country or type spends no velocity token:
//
//  1. the number parses as an international number (libphonenumber,
//     through internal/phone) and, when AllowedCountries is set, is a
//     valid number of one of them;
//  2. its type (premium rate, shared cost, ...) is not in RefuseTypes;
//  3. PerPrefix allows one more message to the number's first
//     PrefixDigits digits (pumping walks number ranges);
//  4. PerUser allows one more message to the user.
//
// The limiters are Sluice's own (ratelimit, on Redis when configured), so
// the limits hold across every node. A limiter that fails is logged and
// passed (as the marketing cap does): the guard is a cost control, and an
// OTP must not wait for Redis.
type SMS struct {
	opts  SMSOptions
	cache *numberCache
}

var _ notify.SMSGuard = (*SMS)(nil)

// SMSOptions configure an SMS. The zero value checks nothing.
type SMSOptions struct {
	// AllowedCountries are ISO 3166-1 alpha-2 codes ("US", "GB"). If
	// empty, every country is allowed and numbers libphonenumber finds
	// invalid pass too (the provider decides); if set, only valid
	// numbers of these countries pass.
	AllowedCountries []string
	// RefuseTypes are the number types refused, such as
	// phone.PremiumRate and phone.SharedCost.
	RefuseTypes []phone.Type
	// PrefixDigits is how many E.164 digits (country code included) make
	// a destination prefix for PerPrefix. If zero, 6.
	PrefixDigits int
	// PerPrefix, if not nil, limits messages per destination prefix (the
	// key is the prefix's digits).
	PerPrefix ratelimit.Limiter
	// PerUser, if not nil, limits SMS messages per user (the key is the
	// user id).
	PerUser ratelimit.Limiter
	// Refused, if set, is told every refusal's reason (for metrics).
	Refused func(reason string)
	Logger  *slog.Logger
	Now     func() time.Time
}

// NewSMS returns a guard with opts' defaults filled in.
func NewSMS(opts SMSOptions) *SMS {
	if opts.PrefixDigits <= 0 {
		opts.PrefixDigits = 6
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// Parsing costs a few hundred microseconds (libphonenumber's regular
	// expressions), so parsed numbers are kept: numbering plans do not
	// change while a node runs, and a user's number recurs.
	return &SMS{opts: opts, cache: newNumberCache(100_000, 24*time.Hour, opts.Now)}
}

// Check decides whether user may be sent an SMS at number (E.164, as
// settings store it); it returns nil, or an apperr Unprocessable naming
// the reason. Every call that passes spends one token of each limiter.
func (g *SMS) Check(ctx context.Context, user, number string) error {
	o := g.opts
	if len(o.AllowedCountries) > 0 || len(o.RefuseTypes) > 0 {
		n := g.cache.get(number, func() phone.Number {
			n, err := phone.Parse(number)
			if err != nil {
				n = phone.Number{E164: number, Type: phone.Unknown}
			}
			return n
		})
		if len(o.AllowedCountries) > 0 {
			if !n.Valid {
				return g.refuse(SMSNumberInvalid, "the number %s is not a valid number of any country", mask(n.E164))
			}
			if !slices.Contains(o.AllowedCountries, n.Country) {
				return g.refuse(SMSCountryNotAllowed, "the number %s is in %s, which is not among the allowed countries (%s)",
					mask(n.E164), n.Country, strings.Join(o.AllowedCountries, ", "))
			}
		}
		if slices.Contains(o.RefuseTypes, n.Type) {
			return g.refuse(SMSNumberType, "the number %s is a %s number, which is refused", mask(n.E164), strings.ReplaceAll(string(n.Type), "_", " "))
		}
		number = n.E164
	}
	if o.PerPrefix != nil {
		p := prefix(number, o.PrefixDigits)
		if !g.allow(ctx, o.PerPrefix, p) {
			return g.refuse(SMSPrefixVelocity, "too many SMS messages to numbers starting +%s; try again later", p)
		}
	}
	if o.PerUser != nil && !g.allow(ctx, o.PerUser, user) {
		return g.refuse(SMSUserVelocity, "too many SMS messages to this user; try again later")
	}
	return nil
}

func (g *SMS) allow(ctx context.Context, l ratelimit.Limiter, key string) bool {
	d, err := l.Allow(ctx, key, 1)
	if err != nil {
		g.opts.Logger.Warn("SMS guard velocity check failed; allowing", logKeyError, err)
		return true
	}
	return d.Allowed
}

func (g *SMS) refuse(reason, format string, args ...any) error {
	if g.opts.Refused != nil {
		g.opts.Refused(reason)
	}
	return &apperr.Error{Code: apperr.Unprocessable,
		Message: "SMS refused by the SMS-pumping guard (" + reason + "); nothing was sent or stored",
		Fields:  []apperr.FieldError{{Field: "sms", Detail: reason + ": " + fmt.Sprintf(format, args...)}}}
}

// prefix returns the first n digits of an E.164 number (all when fewer).
func prefix(e164 string, n int) string {
	d := strings.TrimPrefix(e164, "+")
	if len(d) > n {
		d = d[:n]
	}
	return d
}

// mask shows a number's first digits and hides the rest, so a refusal
// does not echo a person's full number to the caller or the logs.
func mask(e164 string) string {
	if len(e164) <= 6 {
		return e164
	}
	return e164[:6] + strings.Repeat("x", len(e164)-6)
}

// numberCache keeps up to max parsed numbers for ttl each. When full, it
// drops everything (cheap, and rare at the size used).
type numberCache struct {
	mu  sync.Mutex
	m   map[string]cachedNumber
	max int
	ttl time.Duration
	now func() time.Time
}

type cachedNumber struct {
	n       phone.Number
	expires time.Time
}

func newNumberCache(max int, ttl time.Duration, now func() time.Time) *numberCache {
	return &numberCache{m: map[string]cachedNumber{}, max: max, ttl: ttl, now: now}
}

// get returns the number cached under k, or parse's, which it caches.
func (c *numberCache) get(k string, parse func() phone.Number) phone.Number {
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.n
	}
	n := parse()
	c.mu.Lock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = cachedNumber{n: n, expires: now.Add(c.ttl)}
	c.mu.Unlock()
	return n
}
