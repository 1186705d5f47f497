// Package guard protects notification providers from the service and the
// service from its providers: [Provider] wraps one [notify.Provider] with a
// circuit [Breaker], a [Pacer] that keeps calls within the provider's rate
// (a critical share kept apart), and [Metrics] hooks; [Set] gives each
// destination of one provider (a webhook receiver's host) a guard of its
// own. Both are notify.Providers themselves, so the notification worker
// sees no difference; a call they refuse fails with a notify.Unavailable
// error, which sends the delivery back to the queue without spending an
// attempt. [SMS] protects the service's SMS bill from pumping: it checks a
// destination (country, number type, velocity per prefix and per user)
// before a notification is saved, as a notify.SMSGuard. cmd/sluice wires
// them from the configuration.
package guard
