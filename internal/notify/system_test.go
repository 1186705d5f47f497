package notify

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// A request may not name a system recipient: that would let a caller
// have Sluice sign a message of its choosing with a subscription's secret.
func TestRequestRefusesSystemUsers(t *testing.T) {
	t.Parallel()
	_, err := Request{UserID: SystemUserPrefix + "evs_1", Type: "payment_failed"}.Validate(time.Now())
	e, ok := err.(*apperr.Error)
	if !ok || e.Code != apperr.Unprocessable || len(e.Fields) != 1 || e.Fields[0].Field != "user_id" {
		t.Errorf("Validate(user sluice:evs_1) = %v, want 422 naming user_id", err)
	}
}
