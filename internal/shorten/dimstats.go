package shorten

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// StatsBucket counts a link's hits and conversions over one bucket of
// time (or, as LinkStats.Totals, over the whole span).
type StatsBucket struct {
	Start           time.Time
	Humans, Bots    int64
	Conversions     int64
	ConversionValue float64
}

// GroupCount is a link's hits with one value of a dimension.
type GroupCount struct {
	Value        string
	Humans, Bots int64
}

// LinkStats is a link's statistics over [From, To), read from the hourly
// rollups: a series of buckets of By, and the hits grouped by Group, most
// human clicks first.
type LinkStats struct {
	From, To time.Time
	By       time.Duration
	Group    Dim
	Series   []StatsBucket
	Groups   []GroupCount
	Totals   StatsBucket
}

// MaxStatsGroups bounds the values LinkStats lists.
const MaxStatsGroups = 100

// Stats returns the statistics of the link with code, which the caller
// must own, over [from, to) widened to whole hours, in buckets of by (an
// hour or a day), grouped by group. A zero from is 7 days before to, a
// zero to is now.
func (s *Service) Stats(ctx context.Context, caller Caller, code string, from, to time.Time, by time.Duration, group Dim) (LinkStats, error) {
	st, ok := s.store.(StatsStore)
	if !ok {
		return LinkStats{}, errNoStats
	}
	if to.IsZero() {
		to = s.now()
	}
	if from.IsZero() {
		from = to.Add(-7 * 24 * time.Hour)
	}
	var fields []apperr.FieldError
	if by != time.Hour && by != 24*time.Hour {
		fields = append(fields, apperr.FieldError{Field: "by", Detail: "must be hour or day"})
	}
	if _, ok := DimNames[group]; !ok {
		fields = append(fields, apperr.FieldError{Field: "group", Detail: "is not a dimension"})
	}
	from, to = from.UTC().Truncate(time.Hour), to.UTC().Add(time.Hour-1).Truncate(time.Hour)
	if !from.Before(to) {
		fields = append(fields, apperr.FieldError{Field: "from", Detail: "must be before to"})
	} else if by > 0 && to.Sub(from)/by > MaxClickBuckets {
		fields = append(fields, apperr.FieldError{Field: "from", Detail: "the span holds more than 1000 buckets"})
	}
	if err := apperr.Fields(apperr.Unprocessable, "the stats query is invalid", fields); err != nil {
		return LinkStats{}, err
	}
	l, err := s.Get(ctx, caller, code)
	if err != nil {
		return LinkStats{}, err
	}
	hours := int64(by / time.Hour)
	series, groups, err := st.LinkStats(ctx, l.ID, from.Unix()/3600, to.Unix()/3600, hours, group, MaxStatsGroups)
	if err != nil {
		return LinkStats{}, err
	}
	out := LinkStats{From: from, To: to, By: by, Group: group, Series: series, Groups: groups}
	for _, b := range series {
		out.Totals.Humans += b.Humans
		out.Totals.Bots += b.Bots
		out.Totals.Conversions += b.Conversions
		out.Totals.ConversionValue += b.ConversionValue
	}
	return out, nil
}
