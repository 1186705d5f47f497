package main

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/config"
	"github.com/sluicehq/sluice/internal/metrics"
	"github.com/sluicehq/sluice/internal/notify"
	"github.com/sluicehq/sluice/internal/notify/guard"
	"github.com/sluicehq/sluice/internal/phone"
	"github.com/sluicehq/sluice/ratelimit"
)

// smsGuard builds the SMS-pumping guard from its configuration; its
// velocity limits count in the node's shared counters (Redis when
// configured), so they hold across nodes. It returns nil when every check
// is off.
func (n *node) smsGuard(gc config.SMSGuard) (notify.SMSGuard, error) {
	opts := guard.SMSOptions{AllowedCountries: gc.AllowedCountries, PrefixDigits: gc.PrefixDigits, Logger: n.log}
	for _, c := range gc.AllowedCountries {
		if !phone.KnownCountry(c) {
			hint := ""
			if c == "UK" {
				hint = " (the United Kingdom is GB)"
			}
			return nil, fmt.Errorf("--notify-sms-allowed-countries: %s is not a country with a numbering plan%s", c, hint)
		}
	}
	for _, t := range gc.RefuseTypes {
		opts.RefuseTypes = append(opts.RefuseTypes, phone.Type(t))
	}
	if gc.PrefixLimit > 0 {
		lim, err := ratelimit.NewPolicyLimiter(n.counters, ratelimit.Policy{Name: "notify_sms_per_prefix",
			Algorithm: ratelimit.TokenBucket, Limit: int64(gc.PrefixLimit), Period: gc.PrefixPeriod})
		if err != nil {
			return nil, fmt.Errorf("sms guard prefix limit: %w", err)
		}
		opts.PerPrefix = lim
	}
	if gc.UserLimit > 0 {
		lim, err := ratelimit.NewPolicyLimiter(n.counters, ratelimit.Policy{Name: "notify_sms_per_user",
			Algorithm: ratelimit.TokenBucket, Limit: int64(gc.UserLimit), Period: gc.UserPeriod})
		if err != nil {
			return nil, fmt.Errorf("sms guard user limit: %w", err)
		}
		opts.PerUser = lim
	}
	if len(opts.AllowedCountries) == 0 && len(opts.RefuseTypes) == 0 && opts.PerPrefix == nil && opts.PerUser == nil {
		return nil, nil
	}
	opts.Refused = metrics.NewSMSGuardRefusals(n.reg)
	return guard.NewSMS(opts), nil
}
