package shorten

import (
	"context"
	"fmt"
	"time"
)

// Link is one short link. Each creation makes its own Link, even for a URL
// already shortened: owner, expiry and clicks belong to the request.
type Link struct {
	ID int64
	// Domain is the custom domain the link answers on ("" for none: it
	// answers on every host not registered as a domain); Code is unique
	// per domain.
	Domain string
	Code   string
	URL    string
	// Owner is the API key id that created the link; empty for links made
	// by loopback clients without a key, or for a notification.
	Owner string
	// NotificationID is set on links made for a notification's message.
	NotificationID string
	CreatedAt      time.Time
	// ExpiresAt is the zero time for a link that never expires.
	ExpiresAt time.Time
	// Clicks counts human clicks, BotHits everything else.
	Clicks       int64
	BotHits      int64
	FirstClickAt time.Time // of the first human click; zero before one
	// LinkExtras are the optional behaviours of a link (visits.go).
	LinkExtras
	// Visits counts the human visits a visit-limited link let through.
	Visits int64
	// Conversions counts the conversions recorded against its clicks.
	Conversions int64
	// Rules are the link's redirect rules (rules.go), in order; nil for
	// none.
	Rules []Rule
}

// Expired reports whether the link has expired at now.
func (l Link) Expired(now time.Time) bool {
	return !l.ExpiresAt.IsZero() && !now.Before(l.ExpiresAt)
}

// Click is one recorded hit on a link.
type Click struct {
	LinkID int64
	At     time.Time
	Bot    bool
	// Reason says why a hit is a bot's (see ClassifyHit); empty for humans.
	Reason string
	// Visitor is a keyed hash of the client address and user agent, so
	// unique visitors can be counted without storing who they are.
	Visitor string
	// Dimensions are what stats group clicks by (analytics.go).
	Dimensions
	// Code is the link's code as the hit reached it, and Domain its
	// custom domain ("" for none), for Options.OnClicks; not stored.
	Code, Domain string
}

// NewLink is a link to create: Code is empty when the store should give it
// one from the id sequence.
type NewLink struct {
	Domain         string
	Code           string
	URL            string
	Owner          string
	NotificationID string
	CreatedAt      time.Time
	ExpiresAt      time.Time
	LinkExtras
}

// Store is what the shortener needs from the record store. Its behaviour
// is pinned by the store's conformance suite.
type Store interface {
	// CreateLinks inserts links in one transaction. Links without a Code
	// get a fresh id from the sequence and code(id) as their code; links
	// with one get a fresh id too. A link whose code, or whose
	// (notification, URL) pair, is already taken, or whose Domain is not
	// registered (DomainStore), is skipped, not an error:
	// created[i] reports whether links[i] went in, and out[i] is the stored
	// form (id and code set) of those that did.
	CreateLinks(ctx context.Context, links []NewLink, code func(id int64) (string, error)) (out []Link, created []bool, err error)
	// LinkByCode returns the link with code on domain ("" for links
	// without a domain), or an apperr NotFound error.
	LinkByCode(ctx context.Context, domain, code string) (Link, error)
	// NotificationLink returns the link of notification id for url, or an
	// apperr NotFound error.
	NotificationLink(ctx context.Context, notificationID, url string) (Link, error)
	// NotificationLinks returns the links of a notification, oldest first.
	NotificationLinks(ctx context.Context, notificationID string) ([]Link, error)
	// ListLinks returns owner's links, newest first, with ids below before
	// (no bound when before is 0), at most limit of them; only those on
	// *domain when domain is not nil ("" for links without a domain).
	ListLinks(ctx context.Context, owner string, domain *string, before int64, limit int) ([]Link, error)
	// DeleteLink removes the link with code on domain and its clicks, or
	// fails with apperr NotFound.
	DeleteLink(ctx context.Context, domain, code string) error
	ClickStore
	// SetLinkRules replaces the rules of the link with code on domain
	// (nil: none) and returns the link as stored, or fails with apperr
	// NotFound.
	SetLinkRules(ctx context.Context, domain, code string, rules []Rule) (Link, error)
	// PurgeExpiredLinks deletes up to limit links (and their clicks) that
	// expired before before, and returns how many went.
	PurgeExpiredLinks(ctx context.Context, before time.Time, limit int) (int, error)
}

// errorf makes a plain error whose text is a reason for a field error.
func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }
