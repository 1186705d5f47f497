package notify

import (
	"context"
)

// SMSGuard checks an SMS destination before a notification is saved, and
// before a failover message goes to SMS, to stop SMS pumping: it returns
// nil, or an apperr Unprocessable naming the reason, which refuses the
// whole request. guard.SMS is the one Sluice runs.
type SMSGuard interface {
	Check(ctx context.Context, user, number string) error
}

// checkSMS runs the guard on the SMS delivery among ds that is live
// (queued), if any, to the user's phone.
func (s *Service) checkSMS(ctx context.Context, user string, st Settings, ds []Delivery) error {
	if s.opts.SMSGuard == nil || st.Contacts.Phone == "" {
		return nil
	}
	for _, d := range ds {
		if d.Channel == SMS && d.Status == StatusQueued {
			return s.opts.SMSGuard.Check(ctx, user, st.Contacts.Phone)
		}
	}
	return nil
}

// smsRefused answers a request the guard refused with refusal, unless it
// repeats (same request_id and body) one accepted before: a client's retry
// of an accepted OTP gets the first answer, not a velocity refusal its
// own first try caused.
func (s *Service) smsRefused(ctx context.Context, requestID, hash string, refusal error) (Accepted, error) {
	if requestID == "" {
		return Accepted{}, refusal
	}
	prev, err := s.opts.Store.NotificationByRequestID(ctx, requestID)
	switch {
	case err != nil:
		return Accepted{}, refusal
	case prev.RequestHash != hash:
		return Accepted{}, conflict(requestID)
	}
	return Accepted{NotificationID: prev.ID, Duplicate: true}, nil
}

// fallbackAllowed reports whether a failover message of j may go to
// channel ch: an SMS passes the guard first, as it would at acceptance,
// so a message whose own channel fails (an address made to bounce) cannot
// reach a number the guard refuses.
func (s *Service) fallbackAllowed(ctx context.Context, j Job, ch Channel, st Settings) bool {
	if ch != SMS || s.opts.SMSGuard == nil || st.Contacts.Phone == "" {
		return true
	}
	if err := s.opts.SMSGuard.Check(ctx, j.UserID, st.Contacts.Phone); err != nil {
		s.log.Warn("failover to SMS refused by the SMS-pumping guard", logKeyNotification, j.NotificationID, logKeyError, err)
		return false
	}
	return true
}
