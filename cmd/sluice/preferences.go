package main

import (
	"context"

	"github.com/sluicehq/sluice/internal/httpapi"
	"github.com/sluicehq/sluice/internal/notify"
)

// preferences adapts the notification service to the end-user preference
// page: a person changes only category and channel switches; contacts,
// locale and quiet hours stay as the application set them. The service's
// own rules (critical stays on, some channel stays on) answer 422.
type preferences struct{ svc *notify.Service }

var _ httpapi.Preferences = preferences{}

func (p preferences) Switches(ctx context.Context, user string) (httpapi.PreferenceSwitches, error) {
	st, err := p.svc.Settings(ctx, user)
	if err != nil {
		return httpapi.PreferenceSwitches{}, err
	}
	return switchesOf(st), nil
}

func (p preferences) SetSwitches(ctx context.Context, user string, sw httpapi.PreferenceSwitches) (httpapi.PreferenceSwitches, error) {
	st, err := p.svc.Settings(ctx, user)
	if err != nil {
		return httpapi.PreferenceSwitches{}, err
	}
	for ch, on := range sw.Channels {
		if st.Channels == nil {
			st.Channels = map[notify.Channel]bool{}
		}
		st.Channels[notify.Channel(ch)] = on
	}
	for cat, on := range sw.Categories {
		if st.Categories == nil {
			st.Categories = map[notify.Category]bool{}
		}
		st.Categories[notify.Category(cat)] = on
	}
	saved, err := p.svc.PutSettings(ctx, user, st)
	if err != nil {
		return httpapi.PreferenceSwitches{}, err
	}
	return switchesOf(saved), nil
}

func switchesOf(st notify.Settings) httpapi.PreferenceSwitches {
	sw := httpapi.PreferenceSwitches{Channels: map[string]bool{}, Categories: map[string]bool{}}
	for ch, on := range st.Channels {
		sw.Channels[string(ch)] = on
	}
	for cat, on := range st.Categories {
		sw.Categories[string(cat)] = on
	}
	return sw
}
