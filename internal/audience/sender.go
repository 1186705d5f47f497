package audience

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/notify"
)

// RequestID is the request id of the notification broadcast id sends to
// user: a resent batch's notifications are duplicates of the first.
func RequestID(id, user string) string { return "bc:" + id + ":" + user }

// Run claims and sends due broadcasts every interval until ctx ends, and
// about once an hour deletes the final broadcasts past Options.Retention.
func (s *Service) Run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	purgeEvery := max(1, int(time.Hour/every))
	for tick := 0; ; tick++ {
		if _, err := s.RunDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("broadcasts: sending due broadcasts failed", "error", err)
		}
		if tick%purgeEvery == 0 {
			if _, err := s.Purge(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("broadcasts: purging old broadcasts failed", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// purgeBatch is how many broadcasts one delete of Purge removes.
const purgeBatch = 1000

// Purge deletes the done and canceled broadcasts last written more than
// Options.Retention ago and returns how many it deleted.
func (s *Service) Purge(ctx context.Context) (int, error) {
	before, total := s.opts.Now().Add(-s.opts.Retention), 0
	for {
		n, err := s.opts.Store.PurgeBroadcasts(ctx, before, purgeBatch)
		total += n
		if err != nil || n < purgeBatch {
			return total, err
		}
	}
}

// RunDue claims the due broadcasts one at a time and sends their due
// groups, until none is due; it returns how many it worked on. A
// broadcast it fails on is left to its lease, which lapses, and is tried
// again then.
func (s *Service) RunDue(ctx context.Context) (int, error) {
	n := 0
	for ctx.Err() == nil {
		b, ok, err := s.opts.Store.ClaimBroadcast(ctx, s.opts.Now(), s.opts.Lease)
		if err != nil || !ok {
			return n, err
		}
		n++
		if err := s.work(ctx, b); err != nil {
			if apperr.Is(err, apperr.Conflict) { // canceled, or the claim lapsed to another node
				continue
			}
			return n, err
		}
	}
	return n, ctx.Err()
}

// claim is a claimed broadcast and the token of its next write.
type claim struct {
	b   Broadcast
	seq int64
}

// save writes p on c's token, renewing the lease unless p says otherwise.
func (s *Service) save(ctx context.Context, c *claim, p Progress) error {
	p.ID, p.Seq, p.Now = c.b.ID, c.seq, s.opts.Now()
	if p.Status == "" {
		p.Status = StatusSending
	}
	if p.DueAt.IsZero() && p.Status.Live() {
		p.DueAt = p.Now.Add(s.opts.Lease)
	}
	seq, err := s.opts.Store.SaveProgress(ctx, p)
	if err != nil {
		return err
	}
	c.seq = seq
	return nil
}

// work sends a claimed broadcast's due groups and lets the claim go.
func (s *Service) work(ctx context.Context, b Broadcast) error {
	c := &claim{b: b, seq: b.Seq}
	if !b.Planned {
		groups, err := s.plan(ctx, c)
		if err != nil {
			return err
		}
		if err := s.save(ctx, c, Progress{Status: StatusScheduled, Plan: groups}); err != nil {
			return err
		}
		c.b.Groups, c.b.Planned = groups, true
	}
	planned := map[string]bool{}
	for _, g := range c.b.Groups {
		planned[g.Timezone] = true
	}
	last := ""
	if n := len(c.b.Groups); n > 0 {
		last = c.b.Groups[n-1].Timezone
	}
	sent := false
	for i, g := range c.b.Groups {
		if g.Done || g.DueAt.After(s.opts.Now()) {
			continue
		}
		sel := func(tz string) bool { return tz == g.Timezone || (!planned[tz] && g.Timezone == last) }
		if err := s.sendGroup(ctx, c, g, sel); err != nil {
			return err
		}
		c.b.Groups[i].Done, sent = true, true
	}
	next, status := time.Time{}, StatusDone
	for _, g := range c.b.Groups {
		if !g.Done && (next.IsZero() || g.DueAt.Before(next)) {
			next, status = g.DueAt, StatusSending
		}
	}
	if status == StatusSending && !sent && c.b.Status == StatusScheduled {
		status = StatusScheduled
	}
	if err := s.save(ctx, c, Progress{Status: status, DueAt: next}); err != nil {
		return err
	}
	if f := s.opts.Metrics.Ended; f != nil && status == StatusDone {
		f(StatusDone)
	}
	return nil
}

// plan reads the members' timezones and returns one group per timezone,
// due at the broadcast's local time there, by due time.
func (s *Service) plan(ctx context.Context, c *claim) ([]Group, error) {
	due := map[string]time.Time{}
	err := s.members(ctx, c, "", func(users []string, tzs []string) (bool, error) {
		for _, tz := range tzs {
			if _, ok := due[tz]; ok {
				continue
			}
			loc, err := time.LoadLocation(tz)
			if err != nil {
				loc = time.UTC
			}
			due[tz], _ = c.b.Local.in(loc)
		}
		return false, s.save(ctx, c, Progress{Status: StatusScheduled}) // renew the lease
	})
	if err != nil {
		return nil, err
	}
	groups := make([]Group, 0, len(due))
	for tz, at := range due {
		groups = append(groups, Group{Timezone: tz, DueAt: at})
	}
	if len(groups) == 0 {
		groups = append(groups, Group{Timezone: "UTC", DueAt: c.b.SendAt})
	}
	slices.SortFunc(groups, func(a, b Group) int {
		if d := a.DueAt.Compare(b.DueAt); d != 0 {
			return d
		}
		return compareStrings(a.Timezone, b.Timezone)
	})
	return groups, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// members streams the audience after cursor in batches, with each
// member's timezone ("UTC" for none) for a local-time broadcast, and
// calls fn with each batch until fn reports it done or the audience ends.
func (s *Service) members(ctx context.Context, c *claim, cursor string, fn func(users, tzs []string) (bool, error)) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		users, err := s.opts.Store.Subscribers(ctx, c.b.To.Topic, cursor, s.opts.Batch)
		if err != nil || len(users) == 0 {
			return err
		}
		_ = s.opts.Notifier.PrefetchSettings(ctx, users) // a failure leaves each send to read its own
		tzs := make([]string, len(users))
		if c.b.Local != (Local{}) {
			for i, u := range users {
				st, err := s.opts.Notifier.Settings(ctx, u)
				if err != nil {
					return err
				}
				tzs[i] = st.Timezone
				if tzs[i] == "" {
					tzs[i] = "UTC"
				}
			}
		}
		if done, err := fn(users, tzs); done || err != nil || len(users) < s.opts.Batch {
			return err
		}
		cursor = users[len(users)-1]
	}
}

// sendGroup sends g's members after its cursor, a batch at a time, each
// batch checkpointed, and marks g done.
func (s *Service) sendGroup(ctx context.Context, c *claim, g Group, sel func(tz string) bool) error {
	if g.Cursor == "" && c.b.Status == StatusScheduled {
		if err := s.save(ctx, c, Progress{}); err != nil { // sending
			return err
		}
		c.b.Status = StatusSending
	}
	last, cursor := false, g.Cursor
	err := s.members(ctx, c, g.Cursor, func(users, tzs []string) (bool, error) {
		var p Progress
		for i, u := range users {
			if c.b.Local != (Local{}) && !sel(tzs[i]) {
				continue
			}
			p.Targeted++
			_, err := s.opts.Notifier.Send(ctx, notify.Request{RequestID: RequestID(c.b.ID, u), UserID: u,
				Type: c.b.Type, Data: c.b.Data, Channels: channels(c.b.Channels)})
			switch {
			case err == nil:
				p.Accepted++
			case retryable(ctx, err):
				return true, err // the batch is resent by the next claim
			default:
				p.Skipped++
				s.log.Debug("broadcasts: a member's send was refused", "broadcast", c.b.ID, "user", u, "error", err)
			}
		}
		cursor, last = users[len(users)-1], len(users) < s.opts.Batch
		p.Group = &Group{Timezone: g.Timezone, Cursor: cursor, Done: last}
		if err := s.save(ctx, c, p); err != nil {
			return true, err
		}
		if f := s.opts.Metrics.Members; f != nil {
			f(p.Accepted, p.Skipped)
		}
		return false, nil
	})
	if err != nil || last {
		return err
	}
	// The audience ended on a full batch (or was empty): the last
	// checkpoint did not mark the group done.
	return s.save(ctx, c, Progress{Group: &Group{Timezone: g.Timezone, Cursor: cursor, Done: true}})
}

// retryable reports an error of a send the next claim should try again
// (the store or the queue down, ctx ended) rather than count as skipped.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch apperr.CodeOf(err) {
	case apperr.Invalid, apperr.Unprocessable, apperr.NotFound, apperr.Conflict, apperr.TooMany, apperr.Forbidden, apperr.Gone:
		return apperr.IsTransient(err)
	}
	return true
}

func channels(names []string) []notify.Channel {
	if len(names) == 0 {
		return nil
	}
	out := make([]notify.Channel, len(names))
	for i, n := range names {
		out[i] = notify.Channel(n)
	}
	return out
}
