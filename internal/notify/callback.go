package notify

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Callback is a provider's HTTP callback (a delivery receipt) as received
// at POST /v1/providers/{provider}/callbacks.
type Callback struct {
	// RequestURI is the path and query as received.
	RequestURI string
	Header     http.Header
	// Form is the parsed body of a form post (empty otherwise).
	Form url.Values
}

// Report is what a callback says about one delivery.
type Report struct {
	Key               DeliveryKey
	ProviderMessageID string
	// Status is StatusDelivered or StatusFailed; a report of any other
	// state (queued, sent by the carrier) is accepted and changes nothing.
	Status Status
	Error  string
}

// CallbackParser is a provider that accepts delivery receipts: it checks
// the callback's signature (ErrBadSignature when it does not match) and
// reads its reports.
type CallbackParser interface {
	ParseCallback(c Callback) ([]Report, error)
}

// ErrBadSignature is a callback whose signature does not verify.
var ErrBadSignature = errors.New("callback signature does not match")

// Callback applies a provider's delivery receipt. Unknown providers are
// NotFound, bad signatures Unauthorized. A report for a delivery not yet
// recorded as sent is Unavailable, so the provider sends it again later.
func (s *Service) Callback(ctx context.Context, provider string, c Callback) error {
	p := s.opts.Callbacks[provider]
	if p == nil {
		return apperr.New(apperr.NotFound, "no provider %s takes callbacks", provider)
	}
	reports, err := p.ParseCallback(c)
	if errors.Is(err, ErrBadSignature) {
		return apperr.New(apperr.Unauthorized, "callback signature does not match")
	}
	if err != nil {
		return &apperr.Error{Code: apperr.Invalid, Message: "malformed callback", Err: err}
	}
	for _, r := range reports {
		if r.Status != StatusDelivered && r.Status != StatusFailed {
			continue
		}
		ok, err := s.opts.Store.RecordReceipt(ctx, r.Key, r.Status, r.Error, s.now())
		if apperr.Is(err, apperr.NotFound) {
			continue // deleted by retention, or not ours
		}
		if err != nil {
			return err
		}
		if ok && s.opts.OnStatus != nil {
			if d, err := s.opts.Store.Delivery(ctx, r.Key); err == nil {
				s.emitDelivery(ctx, StatusEvent{NotificationID: d.NotificationID, UserID: d.UserID, Category: d.Category,
					Channel: d.Channel, Status: r.Status, Attempts: d.Attempts, Error: r.Error, Provider: d.Provider, At: s.now()})
			}
		}
		if !ok {
			d, err := s.opts.Store.Delivery(ctx, r.Key)
			if err == nil && !d.Status.Terminal() {
				return apperr.New(apperr.Unavailable, "delivery %s is not recorded as sent yet", r.Key)
			}
		}
	}
	return nil
}
