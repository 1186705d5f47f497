package notify

import (
	"context"
	"maps"
)

// Switches are what a person controls on their preference page: channels
// and categories on or off. Everything else in their settings (contacts,
// locale, time zone, quiet hours) stays as the application set it.
type Switches struct {
	Channels   map[Channel]bool
	Categories map[Category]bool
}

// Switches returns user's channel and category switches, defaults filled
// in.
func (s *Service) Switches(ctx context.Context, user string) (Switches, error) {
	st, err := s.Settings(ctx, user)
	if err != nil {
		return Switches{}, err
	}
	return switchesOf(st), nil
}

// SetSwitches is the end-user preference rule: a person changes only
// category and channel switches. It turns the switches in sw on or off,
// keeps user's other switches, contacts, locale, time zone and quiet hours
// as they are, stores the result and returns the switches saved. The
// settings' own rules (critical stays on, some channel stays on, known
// channels and categories only) answer apperr Unprocessable naming the
// field, as PutSettings does.
func (s *Service) SetSwitches(ctx context.Context, user string, sw Switches) (Switches, error) {
	st, err := s.Settings(ctx, user)
	if err != nil {
		return Switches{}, err
	}
	for ch, on := range sw.Channels {
		if st.Channels == nil {
			st.Channels = map[Channel]bool{}
		}
		st.Channels[ch] = on
	}
	for cat, on := range sw.Categories {
		if st.Categories == nil {
			st.Categories = map[Category]bool{}
		}
		st.Categories[cat] = on
	}
	saved, err := s.PutSettings(ctx, user, st)
	if err != nil {
		return Switches{}, err
	}
	return switchesOf(saved), nil
}

// switchesOf copies st's switches into maps of their own, never nil.
func switchesOf(st Settings) Switches {
	sw := Switches{Channels: map[Channel]bool{}, Categories: map[Category]bool{}}
	maps.Copy(sw.Channels, st.Channels)
	maps.Copy(sw.Categories, st.Categories)
	return sw
}
