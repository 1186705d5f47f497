package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/apperr"
	"github.com/sluicehq/sluice/internal/auth"
	"github.com/sluicehq/sluice/internal/breaker"
	"github.com/sluicehq/sluice/internal/shorten"
)

// Links is what the link routes need from the shortener (*shorten.Service).
type Links interface {
	Create(ctx context.Context, req shorten.CreateRequest) (shorten.Link, error)
	Get(ctx context.Context, caller shorten.Caller, code string) (shorten.Link, error)
	Delete(ctx context.Context, caller shorten.Caller, code string) error
	List(ctx context.Context, caller shorten.Caller, domain *string, cursor string, limit int) ([]shorten.Link, string, error)
	Redirect(ctx context.Context, r shorten.Request) (shorten.Redirect, error)
	LinkURL(l shorten.Link) string
	CreateDomain(ctx context.Context, caller shorten.Caller, name, fallbackURL string) (shorten.Domain, error)
	Domains(ctx context.Context, caller shorten.Caller) ([]shorten.Domain, error)
	Domain(ctx context.Context, caller shorten.Caller, name string) (shorten.Domain, error)
	UpdateDomain(ctx context.Context, caller shorten.Caller, name, fallbackURL string) (shorten.Domain, error)
	DeleteDomain(ctx context.Context, caller shorten.Caller, name string) error
	VerifyDomain(ctx context.Context, caller shorten.Caller, name string) (shorten.Domain, string, error)
	SetRules(ctx context.Context, caller shorten.Caller, code string, rules []shorten.Rule) (shorten.Link, error)
}

// Link list page sizes.
const (
	defaultLinkPage = 50
	maxLinkPage     = 500
)

func (s *Server) registerLinks() {
	s.Handle("POST /v1/links", auth.ScopeLinksWrite, s.createLink)
	s.Handle("GET /v1/links", auth.ScopeLinksWrite, s.listLinks)
	s.Handle("GET /v1/links/{code}", auth.ScopeLinksWrite, s.getLink)
	s.Handle("DELETE /v1/links/{code}", auth.ScopeLinksWrite, s.deleteLink)
	s.registerLinkRules()
	s.registerDomains()
	// GET patterns serve HEAD too; a separate "HEAD /{code}" would
	// conflict with "GET /healthz" and the other fixed GET routes.
	s.Handle("GET /{code}", public, s.redirect)
}

var errLinksOff = apperr.New(apperr.Unavailable, "the URL shortener is not configured on this server")

type linkRequest struct {
	URL       string `json:"url"`
	Slug      string `json:"slug"`
	Domain    string `json:"domain"`
	ExpiresAt string `json:"expires_at"`
	linkExtrasRequest
}

// LinkResponse is a link as the API shows it.
type linkResponse struct {
	Code           string         `json:"code"`
	Domain         string         `json:"domain,omitempty"`
	ShortURL       string         `json:"short_url"`
	URL            string         `json:"url"`
	ExpiresAt      *time.Time     `json:"expires_at"`
	CreatedAt      time.Time      `json:"created_at"`
	Clicks         int64          `json:"clicks"`
	BotHits        int64          `json:"bot_hits"`
	FirstClickAt   *time.Time     `json:"first_click_at"`
	NotificationID string         `json:"notification_id,omitempty"`
	Rules          []shorten.Rule `json:"rules,omitempty"`
	linkExtrasResponse
}

func (s *Server) toLinkResponse(l shorten.Link) linkResponse {
	return linkResponse{
		Code: l.Code, Domain: l.Domain, ShortURL: s.opts.Links.LinkURL(l), URL: l.URL,
		ExpiresAt: optTime(l.ExpiresAt), CreatedAt: l.CreatedAt.UTC(),
		Clicks: l.Clicks, BotHits: l.BotHits, FirstClickAt: optTime(l.FirstClickAt),
		NotificationID: l.NotificationID, Rules: l.Rules, linkExtrasResponse: toLinkExtras(l),
	}
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func linkCaller(r *http.Request) shorten.Caller {
	k := callerOf(r)
	return shorten.Caller{ID: k.ID, Admin: k.ID == "" || k.Allows(auth.ScopeAdmin)}
}

func (s *Server) createLink(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	var req linkRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	caller := linkCaller(r)
	cr := shorten.CreateRequest{URL: req.URL, Slug: req.Slug, Domain: req.Domain, Owner: callerOf(r).ID, Admin: caller.Admin, LinkExtras: req.extras()}
	if req.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339Nano, req.ExpiresAt)
		if err != nil {
			return &apperr.Error{Code: apperr.Invalid, Message: "expires_at is not a time",
				Fields: []apperr.FieldError{{Field: "expires_at", Detail: "must be an RFC 3339 time such as 2026-12-01T10:00:00Z"}}}
		}
		cr.ExpiresAt = t
	}
	l, err := s.opts.Links.Create(r.Context(), cr)
	if err != nil {
		return err
	}
	loc := "/v1/links/" + l.Code
	if l.Domain != "" {
		loc += "?domain=" + l.Domain
	}
	w.Header().Set("Location", loc)
	writeJSON(w, http.StatusCreated, s.toLinkResponse(l))
	return nil
}

func (s *Server) listLinks(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	limit := defaultLinkPage
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLinkPage {
			return &apperr.Error{Code: apperr.Invalid, Message: "limit is out of range",
				Fields: []apperr.FieldError{{Field: "limit", Detail: "must be an integer from 1 to " + strconv.Itoa(maxLinkPage)}}}
		}
		limit = n
	}
	links, next, err := s.opts.Links.List(r.Context(), linkCaller(r), domainFilter(r), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]linkResponse, len(links))
	for i, l := range links {
		items[i] = s.toLinkResponse(l)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
	return nil
}

func (s *Server) getLink(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	l, err := s.opts.Links.Get(r.Context(), linkCaller(r), linkKey(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.toLinkResponse(l))
	return nil
}

func (s *Server) deleteLink(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Links == nil {
		return errLinksOff
	}
	if err := s.opts.Links.Delete(r.Context(), linkCaller(r), linkKey(r)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// domainFilter is the ?domain= of a listing: nil when absent (every
// link), "" for the links without a domain.
func domainFilter(r *http.Request) *string {
	q := r.URL.Query()
	if !q.Has("domain") {
		return nil
	}
	d := q.Get("domain")
	return &d
}

// linkKey names the link a /v1/links/{code} route is about: its code,
// on the domain of ?domain= when given (shorten.Key).
func linkKey(r *http.Request) string {
	code := r.PathValue("code")
	d := r.URL.Query().Get("domain")
	if d == "" {
		return code
	}
	norm, err := shorten.NormalizeDomain(d)
	if err != nil {
		norm = "." // a domain no link can be on (never registered): 404
	}
	return shorten.Key(norm, code)
}

// writeStoreDown answers a request refused because the store is known
// down: 503 with the breaker's Retry-After, and no error logged per
// request (the outage was logged once, when the store first failed).
func writeStoreDown(w http.ResponseWriter, r *http.Request, oe *breaker.OpenError) {
	secs := int64((oe.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.FormatInt(max(1, secs), 10))
	WriteProblem(w, r, NewProblem(http.StatusServiceUnavailable, "unavailable", "", oe.Error()))
}

// clientAddr is the client's IP address, the key for per-client limits:
// the peer's, or behind trusted proxies the one they name
// (httplimit.Identifier.ClientIP). An unparsable peer address is used as
// it is.
func (s *Server) clientAddr(r *http.Request) string {
	if ip := s.clients.ClientIP(r); ip.IsValid() {
		return ip.String()
	}
	return r.RemoteAddr
}

// LinkExtras is what conversions need beyond Links; the shortener
// (*shorten.Service) has it. A Links without it answers 503 there.
type LinkExtras interface {
	Convert(ctx context.Context, caller shorten.Caller, clickID, event string, value float64) (shorten.Conversion, bool, error)
}

func (s *Server) linkExtras() (LinkExtras, error) {
	x, ok := s.opts.Links.(LinkExtras)
	if !ok {
		return nil, errLinksOff
	}
	return x, nil
}

// linkExtrasRequest are the optional fields of POST /v1/links.
type linkExtrasRequest struct {
	MaxVisits   int64  `json:"max_visits"`
	FallbackURL string `json:"fallback_url"`
	ClickIDs    bool   `json:"click_ids"`
}

func (x linkExtrasRequest) extras() shorten.LinkExtras {
	return shorten.LinkExtras{MaxVisits: x.MaxVisits, FallbackURL: x.FallbackURL, ClickIDs: x.ClickIDs}
}

// linkExtrasResponse are the fields of a link that come with them.
type linkExtrasResponse struct {
	MaxVisits   *int64 `json:"max_visits"`
	Visits      int64  `json:"visits"`
	FallbackURL string `json:"fallback_url,omitempty"`
	ClickIDs    bool   `json:"click_ids"`
	Conversions int64  `json:"conversions"`
}

func toLinkExtras(l shorten.Link) linkExtrasResponse {
	x := linkExtrasResponse{Visits: l.Visits, FallbackURL: l.FallbackURL, ClickIDs: l.ClickIDs, Conversions: l.Conversions}
	if l.MaxVisits > 0 {
		x.MaxVisits = &l.MaxVisits
	}
	return x
}
