package notify

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
)

// EmailLink is one tracked link of an email, or its open pixel (URL "").
type EmailLink struct {
	Token          string
	NotificationID string
	URL            string
	// SentAt is when the message carrying it was last handed to its
	// provider: the start of the bot window.
	SentAt  time.Time
	Hits    int64     // a person's clicks (or opens)
	BotHits int64     // scanners, previews, proxies, hits in the bot window
	FirstAt time.Time // the first person's hit; zero for none
}

// Pixel reports the open pixel.
func (l EmailLink) Pixel() bool { return l.URL == "" }

// EmailLinkStore keeps email links and their hits; *store.DB implements
// it.
type EmailLinkStore interface {
	// PutEmailLinks stores each link, or, when the notification has a
	// link for its URL already, sets that one's SentAt; it returns the
	// stored links, in order.
	PutEmailLinks(ctx context.Context, links []EmailLink) ([]EmailLink, error)
	// EmailLink returns the link of token (apperr.NotFound when none).
	EmailLink(ctx context.Context, token string) (EmailLink, error)
	// RecordEmailHit counts one hit on token's link at at: a bot's when
	// bot is set (reason says why), else a person's, setting FirstAt
	// when it has none.
	RecordEmailHit(ctx context.Context, token string, bot bool, reason string, at time.Time) error
	// EmailLinks returns the notification's links, pixel included.
	EmailLinks(ctx context.Context, notificationID string) ([]EmailLink, error)
}

// EmailTracking configures tracked links and opens in email. The zero
// value (no Store) tracks nothing.
type EmailTracking struct {
	Store EmailLinkStore
	// BaseURL is the public address tracked links start with
	// ("https://sho.rt"); they are BaseURL + "/e/" + token.
	BaseURL string
	// TrackLinks tracks the links of every email; TrackOpens adds an open
	// pixel to every email with an HTML part.
	TrackLinks, TrackOpens bool
	// BotWindow: hits this soon after the message was handed to its
	// provider are bot hits. If zero, DefaultBotWindow; negative, none.
	BotWindow time.Duration
	// BotNetworks are scanner and proxy networks, besides
	// DefaultBotNetworks: hits from them are bot hits.
	BotNetworks []netip.Prefix
	// ClassifyAgent names a bot by its request (shorten.ClassifyHit). If
	// nil, only HEAD requests and requests without a User-Agent are bots.
	ClassifyAgent func(head bool, userAgent, purpose string) (bot bool, reason string)
	// RewriteText replaces the links of a text with what shorten returns
	// for each (shorten.RewriteLinks). If nil, the text part's links stay.
	RewriteText func(text string, shorten func(url string) (string, error)) string
	// ValidTarget refuses the URLs a tracked link may not redirect to (the
	// shortener's target policy: private addresses, this server); they
	// stay untracked. If nil, any http(s) URL.
	ValidTarget func(url string) error
	// Skip reports links never to track besides {no_track ...} and
	// data-no-track ones: the List-Unsubscribe target. If nil, none.
	Skip func(url string) bool
	// Observe, if not nil, is told of every hit recorded: kind "click"
	// or "open", result "human" or the bot reason.
	Observe func(kind, result string)
	// Timeout bounds the store's work for one message, after which links
	// go out untracked. If zero, two seconds.
	Timeout time.Duration
}

// DefaultBotWindow is EmailTracking.BotWindow's default.
const DefaultBotWindow = 10 * time.Second

// DefaultBotNetworks are the mail-protection networks whose hits are
// always bot hits: Microsoft Exchange Online Protection (which Safe Links
// and Defender for Office 365 scan from), as Microsoft publishes them.
var DefaultBotNetworks = []netip.Prefix{
	netip.MustParsePrefix("40.92.0.0/15"), netip.MustParsePrefix("40.107.0.0/16"),
	netip.MustParsePrefix("52.100.0.0/14"), netip.MustParsePrefix("104.47.0.0/17"),
	netip.MustParsePrefix("2a01:111:f400::/48"), netip.MustParsePrefix("2a01:111:f403::/48"),
}

// Bot reasons of email hits, besides ClassifyAgent's.
const (
	BotReasonNetwork = "network" // from a scanner or proxy network
	BotReasonEarly   = "early"   // within the bot window of sending
)

// Email engagement status event types.
const (
	EventDeliveryClicked = "delivery.clicked"
	EventDeliveryOpened  = "delivery.opened"
)

// EmailHit is one request for a tracked email link or pixel.
type EmailHit struct {
	Head               bool
	UserAgent, Purpose string
	Client             netip.Addr
}

// trackEmail is the rewriter of email links and the open pixel; Sluice's
// own messages to operators (system users) are never tracked.
func (s *Service) trackEmail(ctx context.Context, m Message) (Message, error) {
	t := s.opts.Email
	links := t.TrackLinks || m.TrackLinks
	opens := t.TrackOpens && m.HTML != ""
	if m.Channel != Email || (!links && !opens) || IsSystemUser(m.UserID) {
		return m, nil
	}
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(t.Timeout, 2*time.Second))
	defer cancel()
	orig, now := m, s.now()
	// Two passes over the message: the first finds the URLs to track, one
	// write stores a link for each (and the pixel), the second puts them
	// in. One write a message, not one a link: each write waits for a
	// commit.
	var want []EmailLink
	index := map[string]int{} // URL -> its link in want: one per distinct URL per message
	token := func(url string) {
		if _, ok := index[url]; !ok {
			index[url] = len(want)
			want = append(want, EmailLink{Token: newEmailToken(), NotificationID: m.NotificationID, URL: url, SentAt: now})
		}
	}
	var noTrack []string
	trackable := func(url string) bool {
		return !slices.Contains(noTrack, url) && (t.Skip == nil || !t.Skip(url)) && (t.ValidTarget == nil || t.ValidTarget(url) == nil)
	}
	rewrite := func(m Message, shorten func(url string) (string, error)) Message {
		if t.RewriteText != nil {
			m.Body = t.RewriteText(m.Body, shorten)
		}
		m.HTML = rewriteHrefs(m.HTML, shorten)
		return m
	}
	if links {
		noTrack = append(slices.Clone(m.NoTrack), noTrackHrefs(m.HTML)...)
		rewrite(m, func(url string) (string, error) {
			if trackable(url) {
				token(url)
			}
			return "", errNoTrack
		})
	}
	if opens {
		token("") // the pixel
	}
	if len(want) == 0 {
		return m, nil
	}
	stored, err := t.Store.PutEmailLinks(ctx, want)
	if err != nil {
		// As a Rewriter must: the message goes out as it was, untracked.
		return orig, fmt.Errorf("track email links: %w", err)
	}
	short := func(url string) string { return strings.TrimRight(t.BaseURL, "/") + "/e/" + stored[index[url]].Token }
	if links {
		m = rewrite(m, func(url string) (string, error) {
			if _, ok := index[url]; !ok {
				return "", errNoTrack
			}
			return short(url), nil
		})
	}
	if opens {
		m.HTML = addPixel(m.HTML, short(""))
	}
	return m, nil
}

var errNoTrack = errors.New("link not tracked")

// newEmailToken returns 16 random URL-safe characters (96 bits).
func newEmailToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// EmailHit records a hit on the tracked link or pixel of token and
// returns the link (its URL is where to send a click; the pixel has
// none). A person's first click or open of the message emits
// delivery.clicked or delivery.opened.
func (s *Service) EmailHit(ctx context.Context, token string, h EmailHit) (EmailLink, error) {
	st := s.opts.Email.Store
	if st == nil || !validEmailToken(token) {
		return EmailLink{}, apperr.New(apperr.NotFound, "tracked link not found")
	}
	l, err := st.EmailLink(ctx, token)
	if err != nil {
		return EmailLink{}, err
	}
	// In microseconds, as stored: emitEngagement finds this hit's time
	// among the stored ones.
	now := time.UnixMicro(s.now().UnixMicro()).UTC()
	bot, reason := s.classifyEmailHit(l, h, now)
	if err := st.RecordEmailHit(ctx, token, bot, reason, now); err != nil {
		return l, err
	}
	if obs := s.opts.Email.Observe; obs != nil {
		kind, result := "click", "human"
		if l.Pixel() {
			kind = "open"
		}
		if bot {
			result = reason
		}
		obs(kind, result)
	}
	if !bot {
		s.emitEngagement(ctx, l, now)
	}
	return l, nil
}

func validEmailToken(t string) bool {
	if len(t) != 16 {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// classifyEmailHit decides whether a hit is a bot's: by user agent, by
// network, then by how soon after sending it came.
func (s *Service) classifyEmailHit(l EmailLink, h EmailHit, now time.Time) (bool, string) {
	t := s.opts.Email
	if t.ClassifyAgent != nil {
		if bot, reason := t.ClassifyAgent(h.Head, h.UserAgent, h.Purpose); bot {
			return true, reason
		}
	} else if h.Head || strings.TrimSpace(h.UserAgent) == "" {
		return true, "no_user_agent"
	}
	if h.Client.IsValid() {
		a := h.Client.Unmap()
		for _, p := range slices.Concat(DefaultBotNetworks, t.BotNetworks) {
			if p.Contains(a) {
				return true, BotReasonNetwork
			}
		}
	}
	window := t.BotWindow
	if window == 0 {
		window = DefaultBotWindow
	}
	if window > 0 && now.Sub(l.SentAt) < window {
		return true, BotReasonEarly
	}
	return false, ""
}

// emitEngagement emits delivery.clicked and delivery.opened when the hit
// at at is the message's first click or first open.
func (s *Service) emitEngagement(ctx context.Context, l EmailLink, at time.Time) {
	if s.opts.OnStatus == nil {
		return
	}
	links, err := s.opts.Email.Store.EmailLinks(ctx, l.NotificationID)
	if err != nil {
		s.log.Warn("could not read the email's tracked links", logKeyNotification, l.NotificationID, logKeyError, err)
		return
	}
	clicked, opened := engagementTimes(links)
	var types []string
	if !l.Pixel() && clicked.Equal(at) {
		types = append(types, EventDeliveryClicked)
	}
	if opened.Equal(at) {
		types = append(types, EventDeliveryOpened)
	}
	if len(types) == 0 {
		return
	}
	rec, err := s.opts.Store.Notification(ctx, l.NotificationID)
	if err != nil || IsSystemUser(rec.UserID) {
		return
	}
	i := slices.IndexFunc(rec.Deliveries, func(d Delivery) bool { return d.Channel == Email })
	if i < 0 {
		return
	}
	d := rec.Deliveries[i]
	for _, typ := range types {
		s.opts.OnStatus(context.WithoutCancel(ctx), StatusEvent{Type: typ, NotificationID: rec.ID, UserID: rec.UserID,
			NotificationType: rec.Type, Category: rec.Category, Channel: Email, Status: d.Status, Attempts: d.Attempts,
			Provider: d.Provider, At: at})
	}
}

// engagementTimes returns the first person's click on links and the first
// open: the pixel's first hit or the first click, whichever came first (a
// click shows the message was opened, with its images blocked or not).
func engagementTimes(links []EmailLink) (clicked, opened time.Time) {
	first := func(a, b time.Time) time.Time {
		if a.IsZero() || (!b.IsZero() && b.Before(a)) {
			return b
		}
		return a
	}
	for _, l := range links {
		if l.FirstAt.IsZero() {
			continue
		}
		if !l.Pixel() {
			clicked = first(clicked, l.FirstAt)
		}
		opened = first(opened, l.FirstAt)
	}
	return clicked, opened
}

// emailEngagement fills in d's ClickedAt, OpenedAt and Links from the
// email's tracked links.
func (s *Service) emailEngagement(ctx context.Context, d *Delivery) error {
	links, err := s.opts.Email.Store.EmailLinks(ctx, d.NotificationID)
	if err != nil {
		return err
	}
	d.ClickedAt, d.OpenedAt = engagementTimes(links)
	for _, l := range links {
		if l.Pixel() {
			continue
		}
		d.Links = append(d.Links, Link{Code: l.Token, ShortURL: strings.TrimRight(s.opts.Email.BaseURL, "/") + "/e/" + l.Token,
			URL: l.URL, Clicks: l.Hits, BotHits: l.BotHits, FirstClickAt: l.FirstAt})
	}
	return nil
}
