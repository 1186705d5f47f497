package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// StatsQuery selects a link's statistics. Every field is optional.
type StatsQuery struct {
	// From and To bound the span, widened to whole hours; zero: 7 days
	// before To, and now.
	From, To time.Time
	// By is the bucket, "hour" or "day" (the server's default).
	By string
	// Group is the dimension hits are grouped by: country (the server's
	// default), device, os, referrer, language, source or target.
	Group string
	// Domain is the link's custom domain, for a link on one.
	Domain string
}

// StatsBucket counts human clicks, bot hits and conversions; Start is zero
// in totals, and then left out of its JSON.
type StatsBucket struct {
	Start           time.Time `json:"start,omitzero"`
	Humans          int64     `json:"humans"`
	Bots            int64     `json:"bots"`
	Conversions     int64     `json:"conversions"`
	ConversionValue float64   `json:"conversion_value"`
}

// StatsGroup is the hits of one value of the grouped dimension; Value is
// empty when unknown (no geo database, no Referer...).
type StatsGroup struct {
	Value  string `json:"value"`
	Humans int64  `json:"humans"`
	Bots   int64  `json:"bots"`
}

// LinkStats is a link's clicks and conversions over time (Series, oldest
// first, empty buckets left out) and its hits by one dimension (Groups,
// most human clicks first, at most 100).
type LinkStats struct {
	Code   string        `json:"code"`
	From   time.Time     `json:"from"`
	To     time.Time     `json:"to"`
	By     string        `json:"by"`
	Group  string        `json:"group"`
	Series []StatsBucket `json:"series"`
	Groups []StatsGroup  `json:"groups"`
	Totals StatsBucket   `json:"totals"`
}

// LinkStats returns the statistics of the link with code (GET
// /v1/links/{code}/stats), read from the server's hourly rollups: clicks
// show once the click flusher has run (about a second).
func (c *Client) LinkStats(ctx context.Context, code string, q StatsQuery) (LinkStats, error) {
	v := url.Values{}
	if !q.From.IsZero() {
		v.Set("from", q.From.UTC().Format(time.RFC3339))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.UTC().Format(time.RFC3339))
	}
	if q.By != "" {
		v.Set("by", q.By)
	}
	if q.Group != "" {
		v.Set("group", q.Group)
	}
	if q.Domain != "" {
		v.Set("domain", q.Domain)
	}
	path := "/v1/links/" + url.PathEscape(code) + "/stats"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var s LinkStats
	err := c.Do(ctx, http.MethodGet, path, nil, &s)
	return s, err
}

// QROptions shape a QR code. Every field is optional.
type QROptions struct {
	// Format is "png" (the server's default) or "svg".
	Format string
	// Size is the side in pixels, 64 to 2048; 0: the server's 256.
	Size int
	// Domain is the link's custom domain, for a link on one.
	Domain string
}

// LinkQR returns the QR code of the link with code (GET
// /v1/links/{code}/qr): the image's bytes and its content type
// (image/png or image/svg+xml). The code encodes the short URL with
// ?src=qr, so scans are counted apart from clicks.
func (c *Client) LinkQR(ctx context.Context, code string, o QROptions) (image []byte, contentType string, err error) {
	v := url.Values{}
	if o.Format != "" {
		v.Set("format", o.Format)
	}
	if o.Size != 0 {
		v.Set("size", strconv.Itoa(o.Size))
	}
	if o.Domain != "" {
		v.Set("domain", o.Domain)
	}
	path := "/v1/links/" + url.PathEscape(code) + "/qr"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	_, h, raw, err := c.roundTrip(ctx, http.MethodGet, path, nil, "image/png, image/svg+xml, application/problem+json")
	if err != nil {
		return nil, "", err
	}
	return raw, h.Get("Content-Type"), nil
}

// ConversionRequest reports what a click led to. ClickID (the sluice_cid
// the redirect appended) and Event ("lead", "sale": 1 to 64 of a-z 0-9 _ -
// . :) are required; Value is its worth, in a currency of your choosing.
type ConversionRequest struct {
	ClickID string  `json:"click_id"`
	Event   string  `json:"event"`
	Value   float64 `json:"value,omitempty"`
}

// Conversion is a recorded conversion.
type Conversion struct {
	ClickID        string    `json:"click_id"`
	Event          string    `json:"event"`
	Value          float64   `json:"value"`
	At             time.Time `json:"at"`
	NotificationID string    `json:"notification_id,omitempty"`
	// Duplicate reports that this (click id, event) was recorded before
	// (HTTP 200): the conversion is the first one, unchanged.
	Duplicate bool `json:"-"`
}

// RecordConversion records a conversion against a click (POST
// /v1/conversions), once per (click id, event). A click id the server did
// not issue comes back as *Error with status 422 naming click_id.
func (c *Client) RecordConversion(ctx context.Context, r ConversionRequest) (Conversion, error) {
	var out Conversion
	status, _, err := c.doStatus(ctx, http.MethodPost, "/v1/conversions", r, &out)
	out.Duplicate = status == http.StatusOK
	return out, err
}
