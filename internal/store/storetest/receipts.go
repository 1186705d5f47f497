package storetest

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// receipts pins what provider results add to a delivery: the provider
// that took it, its message id and the hops of a failover, the due time
// of delayed jobs, and receipts that move only sent deliveries.
func (s suite) receipts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := s.migrated(t)
	n, ds := newNotification("ntf_r", "", "u1", t0, notify.SMS, notify.Email)
	mustCreate(t, db, n, ds)
	sms := notify.DeliveryKey{NotificationID: "ntf_r", Channel: notify.SMS}
	email := notify.DeliveryKey{NotificationID: "ntf_r", Channel: notify.Email}

	// Deferred without spending an attempt: due later, with its due time on the job.
	wait := notify.Attempt{Key: email, Status: notify.StatusQueued, Prev: 0, Attempts: 0, Error: "smtp: circuit breaker open",
		NextAttemptAt: t0.Add(30 * time.Second), At: t0}
	if ok, err := db.FinishAttempt(ctx, wait, nil); err != nil || !ok {
		t.Fatalf("FinishAttempt(deferral) = %v, %v", ok, err)
	}
	jobs, err := db.DueDeliveries(ctx, t0.Add(time.Minute), 10)
	if err != nil || len(jobs) != 1 || jobs[0].Due != t0.Add(30*time.Second).UnixMicro() || jobs[0].Attempt != 0 {
		t.Fatalf("DueDeliveries = %+v, %v; want the email with its due time", jobs, err)
	}

	hops := []notify.Hop{
		{Provider: "twilio", Channel: notify.SMS, Result: notify.ClassUnavailable, Error: "open", At: t0},
		{Provider: "twilio-backup", Channel: notify.SMS, Result: notify.ClassOK, At: t0},
	}
	sent := notify.Attempt{Key: sms, Status: notify.StatusSent, Prev: 0, Attempts: 1, At: t0,
		Provider: "twilio-backup", ProviderMessageID: "SM1", Hops: hops}
	if ok, err := db.FinishAttempt(ctx, sent, nil); err != nil || !ok {
		t.Fatalf("FinishAttempt(sent) = %v, %v", ok, err)
	}
	d, err := db.Delivery(ctx, sms)
	if err != nil || d.Provider != "twilio-backup" || d.ProviderMessageID != "SM1" || len(d.Hops) != 2 ||
		d.Hops[0] != hops[0] || d.Hops[1].Provider != "twilio-backup" {
		t.Fatalf("delivery = %+v, %v", d, err)
	}
	if d, _ := db.Delivery(ctx, email); d.Provider != ds[1].Provider || len(d.Hops) != 0 {
		t.Errorf("an attempt without a provider changed it: %+v", d)
	}

	tests := []struct {
		name   string
		key    notify.DeliveryKey
		status notify.Status
		wantOK bool
		want   notify.Status
		err    apperr.Code
	}{
		{name: "a queued delivery does not move", key: email, status: notify.StatusDelivered, want: notify.StatusQueued},
		{name: "sent to delivered", key: sms, status: notify.StatusDelivered, wantOK: true, want: notify.StatusDelivered},
		{name: "a final delivery does not move again", key: sms, status: notify.StatusFailed, want: notify.StatusDelivered},
		{name: "unknown delivery", key: notify.DeliveryKey{NotificationID: "ntf_none", Channel: notify.SMS}, status: notify.StatusDelivered, err: apperr.NotFound},
	}
	for _, tt := range tests {
		ok, err := db.RecordReceipt(ctx, tt.key, tt.status, "", t0.Add(time.Second))
		if tt.err != "" {
			if !apperr.Is(err, tt.err) {
				t.Errorf("%s: RecordReceipt = %v, want %s", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || ok != tt.wantOK {
			t.Errorf("%s: RecordReceipt = %v, %v; want %v", tt.name, ok, err, tt.wantOK)
		}
		if d, _ := db.Delivery(ctx, tt.key); d.Status != tt.want {
			t.Errorf("%s: status %s, want %s", tt.name, d.Status, tt.want)
		}
	}
	checkPipelined(t, db)
}
