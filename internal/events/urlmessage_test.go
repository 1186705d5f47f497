package events_test

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/events"
)

// TestCreateNamesTheRangeInLowerCase: a refused URL's detail reads as a
// sentence, not as the registry's capitalised name of the range.
func TestCreateNamesTheRangeInLowerCase(t *testing.T) {
	t.Parallel()
	b := setup(t, events.Options{})
	for url, want := range map[string]string{
		"http://127.0.0.1:8080/x": "must be globally reachable, not in the loopback range",
		"https://10.0.0.8/x":      "must be globally reachable, not in the private-use range",
	} {
		_, err := b.svc.Create(t.Context(), events.NewSubscription{URL: url, Events: []string{events.DeliverySent}})
		ae, ok := errors.AsType[*apperr.Error](err)
		if !ok || len(ae.Fields) == 0 || ae.Fields[0].Detail != want {
			t.Errorf("Create(%s) = %v, want the url refused with %q", url, err, want)
		}
	}
}
