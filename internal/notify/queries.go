package notify

import (
	"context"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Page limits.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
)

// Notification returns a notification with its deliveries.
func (s *Service) Notification(ctx context.Context, id string) (Record, error) {
	rec, err := s.opts.Store.Notification(ctx, id)
	if err != nil {
		return rec, err
	}
	if rec.Digests, err = s.opts.Store.DigestsOf(ctx, id); err != nil {
		return rec, err
	}
	if s.opts.Email.Store != nil {
		for i, d := range rec.Deliveries {
			if d.Channel != Email || d.Status == StatusSuppressed {
				continue
			}
			if err := s.emailEngagement(ctx, &rec.Deliveries[i]); err != nil {
				s.log.Warn("could not read the email's tracked links", logKeyNotification, id, logKeyError, err)
			}
		}
	}
	if s.opts.Links == nil {
		return rec, nil
	}
	for i, d := range rec.Deliveries {
		if d.Channel != SMS || d.Status == StatusSuppressed {
			continue
		}
		links, err := s.opts.Links.Links(ctx, id)
		if err != nil {
			s.log.Warn("could not read the notification's link clicks", logKeyNotification, id, logKeyError, err)
			break
		}
		rec.Deliveries[i].Links = links
	}
	return rec, nil
}

// UserNotifications returns a page of user's notifications of the last
// History, newest first, and the cursor of the next page ("" at the end).
func (s *Service) UserNotifications(ctx context.Context, user, cursor string, limit int) ([]Record, string, error) {
	return page(cursor, limit, func(c Cursor, n int) ([]Record, error) {
		return s.opts.Store.UserNotifications(ctx, user, s.now().Add(-s.opts.History), c, n)
	}, func(r Record) Cursor { return Cursor{At: r.CreatedAt, ID: r.ID} })
}

// page reads one page through read, asked for one item more than the page
// holds to know whether another follows: the items after cursor (at most
// limit, as pageSize reads it) and the next page's cursor, "" at the end;
// at is an item's place in the order.
func page[T any](cursor string, limit int, read func(c Cursor, n int) ([]T, error), at func(T) Cursor) ([]T, string, error) {
	c, err := DecodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	limit = pageSize(limit)
	items, err := read(c, limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(items) > limit {
		items = items[:limit]
		next = EncodeCursor(at(items[len(items)-1]))
	}
	return items, next, nil
}

func pageSize(limit int) int {
	if limit <= 0 {
		return DefaultPageSize
	}
	return min(limit, MaxPageSize)
}

// Settings returns user's settings, or the defaults when none are stored.
// Results are cached for CacheTTL.
func (s *Service) Settings(ctx context.Context, user string) (Settings, error) {
	st, err := s.sharedSettings(ctx, user)
	return st.Clone(), err
}

// settingsChunk is how many users one prefetch query asks about.
const settingsChunk = 500

// PrefetchSettings loads the settings of the users not cached yet with a
// few queries instead of one per user: a batch of notifications to many
// users (a campaign) calls it before sending them. An error leaves the
// cache as it was (each send then reads its user's settings).
func (s *Service) PrefetchSettings(ctx context.Context, users []string) error {
	todo := s.settings.missing(users)
	for len(todo) > 0 {
		chunk := todo[:min(len(todo), settingsChunk)]
		todo = todo[len(chunk):]
		found, err := s.opts.Store.SettingsOf(ctx, chunk)
		if err != nil {
			return err
		}
		for _, u := range chunk {
			st, ok := found[u]
			if !ok {
				s.settings.put(u, s.defaults)
				continue
			}
			st.fill()
			s.settings.put(u, st)
		}
	}
	return nil
}

// PutSettings checks and stores user's settings and returns them with
// defaults filled in.
func (s *Service) PutSettings(ctx context.Context, user string, st Settings) (Settings, error) {
	if user == "" || len(user) > MaxUserIDBytes || !printable(user) {
		return Settings{}, apperr.New(apperr.Invalid, "invalid user id")
	}
	if err := st.Normalize(); err != nil {
		return Settings{}, err
	}
	st.UpdatedAt = s.now()
	if err := s.opts.Store.PutSettings(ctx, user, st); err != nil {
		return Settings{}, err
	}
	s.settings.forget(user)
	return st, nil
}

// Template returns the template of typ: the stored one, else the shipped
// default; NotFound for a type with neither.
func (s *Service) Template(ctx context.Context, typ string) (Template, error) {
	t, err := s.templates.get(ctx, typ, func(ctx context.Context) (Template, error) {
		t, found, err := s.opts.Store.Template(ctx, typ)
		if err != nil || found {
			return t, err
		}
		if def, ok := DefaultTemplate(typ); ok {
			return def, nil
		}
		return Template{}, nil
	})
	if err != nil {
		return Template{}, err
	}
	if t.Type == "" {
		return Template{}, apperr.New(apperr.NotFound, "no template for type %q", typ)
	}
	return t, nil
}

// PutTemplate checks and stores a template. A shipped type keeps its
// category; a new type needs one and becomes a type callers may send.
func (s *Service) PutTemplate(ctx context.Context, t Template) (Template, error) {
	if def, ok := defaultTypes[t.Type]; ok && t.Category == "" {
		t.Category = def
	}
	if errs := ValidateTemplate(t); len(errs) > 0 {
		return Template{}, apperr.Fields(apperr.Unprocessable, "the template is invalid", errs)
	}
	t.Default = false
	t.UpdatedAt = s.now()
	if err := s.opts.Store.PutTemplate(ctx, t); err != nil {
		return Template{}, err
	}
	s.templates.forget(t.Type)
	s.types.forget("")
	return t, nil
}

// DeadLetters returns a page of dead letters, newest first.
func (s *Service) DeadLetters(ctx context.Context, cursor string, limit int) ([]DeadLetter, string, error) {
	return page(cursor, limit, func(c Cursor, n int) ([]DeadLetter, error) {
		return s.opts.Store.DeadLetters(ctx, c, n)
	}, func(d DeadLetter) Cursor { return Cursor{At: d.CreatedAt, ID: d.ID} })
}

// ReplayDeadLetter sends a dead letter's delivery again: it goes back to
// queued and the scheduler queues it within a tick.
func (s *Service) ReplayDeadLetter(ctx context.Context, id string) (Delivery, error) {
	return s.opts.Store.ReplayDeadLetter(ctx, id, s.now())
}
