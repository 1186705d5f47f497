package httpapi

import (
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/shorten"
)

func (s *Server) registerLinkStats() {
	s.Handle("GET /v1/links/{code}/stats", auth.ScopeLinksWrite, s.linkDimStats)
	s.Handle("GET /v1/links/{code}/qr", auth.ScopeLinksWrite, s.linkQR)
	s.Handle("POST /v1/conversions", auth.ScopeLinksWrite, s.createConversion)
}

type statsBucketJSON struct {
	Start           *time.Time `json:"start,omitempty"`
	Humans          int64      `json:"humans"`
	Bots            int64      `json:"bots"`
	Conversions     int64      `json:"conversions"`
	ConversionValue float64    `json:"conversion_value"`
}

type groupJSON struct {
	Value  string `json:"value"`
	Humans int64  `json:"humans"`
	Bots   int64  `json:"bots"`
}

// linkDimStats answers GET /v1/links/{code}/stats?from&to&by&group from
// the hourly rollups.
func (s *Server) linkDimStats(w http.ResponseWriter, r *http.Request) error {
	ls, err := s.linkStats()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var from, to time.Time
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"from", &from}, {"to", &to}} {
		if v := q.Get(p.name); v != "" {
			if *p.t, err = time.Parse(time.RFC3339, v); err != nil {
				return fieldErrors(apperr.Invalid, p.name, "must be an RFC 3339 time such as 2026-12-01T10:00:00Z")
			}
		}
	}
	by := 24 * time.Hour
	switch q.Get("by") {
	case "", "day":
	case "hour":
		by = time.Hour
	default:
		return fieldErrors(apperr.Invalid, "by", "must be hour or day")
	}
	group := shorten.DimCountry
	if v := q.Get("group"); v != "" {
		d, ok := shorten.ParseDim(v)
		if !ok {
			return fieldErrors(apperr.Invalid, "group", "must be one of country, device, os, referrer, language, source")
		}
		group = d
	}
	st, err := ls.Stats(r.Context(), linkCaller(r), linkKey(r), from, to, by, group)
	if err != nil {
		return err
	}
	out := struct {
		Code   string            `json:"code"`
		From   time.Time         `json:"from"`
		To     time.Time         `json:"to"`
		By     string            `json:"by"`
		Group  string            `json:"group"`
		Series []statsBucketJSON `json:"series"`
		Groups []groupJSON       `json:"groups"`
		Totals statsBucketJSON   `json:"totals"`
	}{Code: r.PathValue("code"), From: st.From, To: st.To, By: map[bool]string{true: "hour", false: "day"}[by == time.Hour],
		Group: shorten.DimNames[st.Group], Series: make([]statsBucketJSON, len(st.Series)), Groups: make([]groupJSON, len(st.Groups)),
		Totals: bucketJSON(st.Totals, false)}
	for i, b := range st.Series {
		out.Series[i] = bucketJSON(b, true)
	}
	for i, g := range st.Groups {
		out.Groups[i] = groupJSON(g)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func bucketJSON(b shorten.StatsBucket, start bool) statsBucketJSON {
	j := statsBucketJSON{Humans: b.Humans, Bots: b.Bots, Conversions: b.Conversions, ConversionValue: b.ConversionValue}
	if start {
		t := b.Start.UTC()
		j.Start = &t
	}
	return j
}
