package notify_test

import (
	"errors"
	"maps"
	"reflect"
	"testing"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// TestSetSwitchesChangesOnlySwitches: a person's page turns categories and
// channels on or off; the contacts, locale, time zone and quiet hours the
// application set stay, and so do the switches the page did not send.
func TestSetSwitchesChangesOnlySwitches(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := t.Context()

	sw, err := b.svc.Switches(ctx, "ann")
	if err != nil || !sw.Categories[notify.Marketing] || !sw.Categories[notify.Critical] || !sw.Channels[notify.Email] {
		t.Fatalf("Switches of a new user = %+v, %v; want marketing, critical and email on by default", sw, err)
	}

	app := notify.Settings{Contacts: notify.Contacts{Email: "ann@example.com", Phone: "+4915112345678"}, Locale: "de",
		Timezone: "Europe/Berlin", QuietHours: notify.QuietHours{Start: "22:00", End: "07:00"}}
	if _, err := b.svc.PutSettings(ctx, "ann", app); err != nil {
		t.Fatal(err)
	}
	got, err := b.svc.SetSwitches(ctx, "ann", notify.Switches{Categories: map[notify.Category]bool{notify.Marketing: false},
		Channels: map[notify.Channel]bool{notify.SMS: false}})
	if err != nil {
		t.Fatalf("turn marketing and sms off: %v", err)
	}
	want := notify.DefaultSettings()
	want.Categories[notify.Marketing], want.Channels[notify.SMS] = false, false
	if !sameSwitches(got, notify.Switches{Channels: want.Channels, Categories: want.Categories}) {
		t.Errorf("SetSwitches = %+v, want %+v", got, want)
	}
	if sw, err := b.svc.Switches(ctx, "ann"); err != nil || !sameSwitches(sw, got) {
		t.Errorf("Switches after SetSwitches = %+v, %v; want %+v", sw, err, got)
	}
	st, err := b.svc.Settings(ctx, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if st.Categories[notify.Marketing] || !st.Categories[notify.Critical] || st.Channels[notify.SMS] || !st.Channels[notify.Email] {
		t.Errorf("settings after the page = %+v; want marketing and sms off, critical and email on", st)
	}
	if !reflect.DeepEqual(st.Contacts, app.Contacts) || st.Locale != "de" || st.Timezone != "Europe/Berlin" || st.QuietHours != app.QuietHours {
		t.Errorf("settings after the page = %+v; want contacts, locale, time zone and quiet hours as the application set them", st)
	}
}

// TestSetSwitchesKeepsTheRules: switches that break a settings rule are
// refused with Unprocessable naming the field, and nothing is stored.
func TestSetSwitchesKeepsTheRules(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	off := map[notify.Channel]bool{}
	for _, ch := range notify.Channels {
		off[ch] = false
	}
	tests := []struct {
		name  string
		sw    notify.Switches
		field string
	}{
		{"critical off", notify.Switches{Categories: map[notify.Category]bool{notify.Critical: false}}, "categories.critical"},
		{"every channel off", notify.Switches{Channels: off}, "channels"},
		{"unknown channel", notify.Switches{Channels: map[notify.Channel]bool{"fax": true}}, "channels.fax"},
		{"unknown category", notify.Switches{Categories: map[notify.Category]bool{"gossip": false}}, "categories.gossip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.svc.SetSwitches(t.Context(), "bob", tt.sw)
			ae, ok := errors.AsType[*apperr.Error](err)
			if !ok || ae.Code != apperr.Unprocessable || len(ae.Fields) == 0 || ae.Fields[0].Field != tt.field {
				t.Errorf("SetSwitches(%+v) = %v, want Unprocessable naming %s", tt.sw, err, tt.field)
			}
		})
	}
	if sw, err := b.svc.Switches(t.Context(), "bob"); err != nil ||
		!sameSwitches(sw, notify.Switches{Channels: notify.DefaultSettings().Channels, Categories: notify.DefaultSettings().Categories}) {
		t.Errorf("Switches after refused changes = %+v, %v; want the defaults", sw, err)
	}
}

func sameSwitches(a, b notify.Switches) bool {
	return maps.Equal(a.Channels, b.Channels) && maps.Equal(a.Categories, b.Categories)
}
