package shorten

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/net/idna"

	"github.com/sluicehq/sluice/internal/apperr"
)

// Domain is a custom short domain, or one owner's claim of it: links
// created on it answer only on requests whose Host is Name, and an unknown
// code there goes to FallbackURL when it is set. While verification is on
// (DomainOptions.Verify), several owners may claim a name at once, each
// with a Token of its own; the first claim whose token is found in DNS is
// verified and the others are dropped. Only a verified domain serves.
type Domain struct {
	// Name is the host name, lower case, in ASCII (IDNA A-labels), without
	// port or trailing dot.
	Name string
	// Owner is the API key id that registered it; empty for a keyless
	// loopback client.
	Owner       string
	FallbackURL string
	CreatedAt   time.Time
	// Token is what the TXT record VerificationRecord(Name) must hold to
	// verify this claim.
	Token string
	// VerifiedAt is when the claim was verified (at registration while
	// verification is off); the zero time while it is not.
	VerifiedAt time.Time
}

// Verified says whether d serves redirects.
func (d Domain) Verified() bool { return !d.VerifiedAt.IsZero() }

// VerificationRecord is the name of the TXT record that proves control of
// domain: "_sluice." + domain.
func VerificationRecord(domain string) string { return "_sluice." + domain }

// DomainLimits bounds the domain rows (claims included) a CreateDomain may
// leave: PerOwner for the new row's owner, Total for the whole store. Zero
// is no bound.
type DomainLimits struct{ PerOwner, Total int }

// DomainStore is what custom domains need from the record store; a store
// without it has no domains (every link answers on every host).
type DomainStore interface {
	// CreateDomain stores d, or fails with an apperr Conflict naming
	// "domain" when the name is verified by anyone, already claimed by
	// d.Owner, or (d being verified already) claimed by anyone; with an
	// apperr TooMany when it would pass limits.
	CreateDomain(ctx context.Context, d Domain, limits DomainLimits) (Domain, error)
	// Domains returns every domain and claim, by name then owner, at most
	// limit.
	Domains(ctx context.Context, limit int) ([]Domain, error)
	// DomainClaims returns the rows of the domain name (the verified one,
	// or every pending claim), oldest first; none is an empty slice.
	DomainClaims(ctx context.Context, name string) ([]Domain, error)
	// UpdateDomain sets the fallback URL of owner's domain name ("" for
	// none) and returns it, or an apperr NotFound error.
	UpdateDomain(ctx context.Context, name, owner, fallbackURL string) (Domain, error)
	// DeleteDomain removes owner's domain name, or fails with apperr
	// NotFound, or with Conflict while links are on it.
	DeleteDomain(ctx context.Context, name, owner string) error
	// VerifyDomain marks owner's claim of name verified at at and drops
	// every other owner's claim, in one transaction; it returns the
	// domain, NotFound when owner has no claim, or Conflict when another
	// owner's claim is verified.
	VerifyDomain(ctx context.Context, name, owner string, at time.Time) (Domain, error)
}

// MaxDomains bounds the domains and claims a deployment may hold: every
// node holds them all in memory for the redirect path.
const MaxDomains = 10_000

// MaxDomainLength bounds a domain name, in bytes (DNS's own bound).
const MaxDomainLength = 253

// domainProfile maps and checks a domain name as browsers look it up
// (UTS #46 non-transitional, STD3 rules, hyphen and bidi checks, DNS
// lengths), giving the lower-case A-label form.
var domainProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(true),
	idna.ValidateLabels(true), idna.BidiRule(), idna.VerifyDNSLength(true), idna.CheckHyphens(true), idna.CheckJoiners(true))

// NormalizeDomain checks a domain name a caller registers or names, and
// returns its lower-case ASCII form ("Bücher.Example" becomes
// "xn--bcher-kva.example"). It must have at least two labels, and no
// port, scheme, path or trailing dot; an IP address literal is refused
// (a domain is named by Host, and a short link needs a name to be
// shared). The error is the reason, for a field error's detail.
func NormalizeDomain(s string) (string, error) {
	switch {
	case s == "":
		return "", errorf("is required")
	case len(s) > MaxDomainLength:
		return "", errorf("is %d bytes long; at most %d are accepted", len(s), MaxDomainLength)
	case strings.ContainsAny(s, ":/?#@[]\\ \t\r\n"):
		return "", errorf("must be a host name only, as in go.example.com (no scheme, port or path)")
	case strings.HasSuffix(s, "."):
		return "", errorf("must not end with a dot")
	case !utf8.ValidString(s):
		return "", errorf("is not valid UTF-8")
	}
	if _, err := netip.ParseAddr(s); err == nil || looksNumeric(s) {
		return "", errorf("must be a host name, not an IP address")
	}
	a, err := domainProfile.ToASCII(s)
	if err != nil {
		return "", errorf("is not a valid host name: %v", err)
	}
	if again, err := domainProfile.ToASCII(a); err != nil || again != a {
		// The mapping made a name that does not stand for itself (a
		// replacement character punycoded): refuse rather than store it.
		return "", errorf("is not a valid host name")
	}
	if !strings.Contains(a, ".") {
		return "", errorf("must have at least two labels, as in go.example.com")
	}
	if a == "localhost" || strings.HasSuffix(a, ".localhost") {
		return "", errorf("must be a public host name")
	}
	return a, nil
}

// RequestHost is the host a request names, as domains are registered:
// lower case, port and trailing dot removed. It does not validate; a
// host no domain has never matches one.
func RequestHost(host string) string {
	if strings.HasPrefix(host, "[") { // an IPv6 literal never names a domain
		return ""
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// Key is how the caches, the shared cache and the announcements name the
// link with code on domain: the code alone for a link without a domain
// (so entries and announcements keep their older form), else
// "domain/code". Neither a domain nor a code holds '/'. Service methods
// that take a code take a key.
func Key(domain, code string) string {
	if domain == "" {
		return code
	}
	return domain + "/" + code
}

// SplitKey reads what Key wrote.
func SplitKey(key string) (domain, code string) {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[:i], key[i+1:]
	}
	return "", key
}

// domainSet is every registered domain, as a node last read them.
type domainSet struct {
	m     map[string]Domain
	until int64 // Unix microseconds: read again after it
}

// domains holds the node's registered domains for the redirect path.
type domains struct {
	set atomic.Pointer[domainSet]
	// gen counts ForgetDomains calls: a read that began before one stores
	// its list already stale, so the change it may have missed is read at
	// the next redirect.
	gen atomic.Int64
}

func (s *Service) domainStore() (DomainStore, error) {
	ds, ok := s.store.(DomainStore)
	if !ok {
		return nil, apperr.New(apperr.Unavailable, "this server's store has no custom domains")
	}
	return ds, nil
}

// CreateDomain registers a domain for the caller. Invalid input, or a
// host this server answers on (DomainOptions.OwnHosts), is an apperr
// Unprocessable error naming "domain" or "fallback_url"; a domain verified
// by anyone (registered by anyone, while verification is off) is a
// Conflict, and so is the caller's own claim again; past a cap, TooMany.
// While verification is on, the new claim serves nothing until
// VerifyDomain finds its token.
func (s *Service) CreateDomain(ctx context.Context, caller Caller, name, fallbackURL string) (Domain, error) {
	ds, err := s.domainStore()
	if err != nil {
		return Domain{}, err
	}
	var fields []apperr.FieldError
	norm, err := NormalizeDomain(name)
	if err != nil {
		fields = append(fields, apperr.FieldError{Field: "domain", Detail: err.Error()})
	} else if s.ownHost(norm) {
		fields = append(fields, apperr.FieldError{Field: "domain", Detail: "is a host this server answers on itself; it can never be a custom domain"})
	}
	fields = append(fields, s.checkFallback(fallbackURL)...)
	if err := apperr.Fields(apperr.Unprocessable, "the domain request is invalid", fields); err != nil {
		return Domain{}, err
	}
	token, err := newDomainToken()
	if err != nil {
		return Domain{}, err
	}
	d := Domain{Name: norm, Owner: caller.ID, FallbackURL: fallbackURL, CreatedAt: s.now(), Token: token}
	if !s.opts.Domains.Verify {
		d.VerifiedAt = d.CreatedAt // registration is the proof
	}
	d, err = ds.CreateDomain(ctx, d, DomainLimits{PerOwner: s.opts.Domains.MaxPerOwner, Total: s.opts.Domains.Max})
	if err != nil {
		return Domain{}, err
	}
	s.domainsChanged()
	return d, nil
}

// Domains returns the domains and claims the caller owns (every one for an
// admin), by name.
func (s *Service) Domains(ctx context.Context, caller Caller) ([]Domain, error) {
	ds, err := s.domainStore()
	if err != nil {
		return nil, err
	}
	all, err := ds.Domains(ctx, MaxDomains)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, d := range all {
		if caller.Admin || d.Owner == caller.ID {
			out = append(out, d)
		}
	}
	return out, nil
}

// Domain returns the caller's domain (or claim) name: an admin's own, else
// for an admin the verified one or the oldest claim; another caller's is
// NotFound, as if absent.
func (s *Service) Domain(ctx context.Context, caller Caller, name string) (Domain, error) {
	ds, err := s.domainStore()
	if err != nil {
		return Domain{}, err
	}
	norm, err := NormalizeDomain(name)
	if err != nil {
		return Domain{}, apperr.New(apperr.NotFound, "domain %q not found", name)
	}
	claims, err := ds.DomainClaims(ctx, norm)
	if err != nil {
		return Domain{}, err
	}
	for _, d := range claims {
		if d.Owner == caller.ID {
			return d, nil
		}
	}
	if caller.Admin && len(claims) > 0 {
		for _, d := range claims {
			if d.Verified() {
				return d, nil
			}
		}
		return claims[0], nil
	}
	return Domain{}, apperr.New(apperr.NotFound, "domain %q not found", norm)
}

// linkDomain is the domain name a caller creates a link on: its own (any,
// for an admin) and verified; else an apperr Unprocessable naming
// "domain", or the store's error.
func (s *Service) linkDomain(ctx context.Context, caller Caller, name string) (Domain, error) {
	d, err := s.Domain(ctx, caller, name)
	switch {
	case apperr.Is(err, apperr.NotFound):
		return Domain{}, errDomainField("is not a domain registered by this caller")
	case err != nil:
		return Domain{}, err
	case !d.Verified():
		return Domain{}, errDomainField(fmt.Sprintf("is not verified yet: publish its verification_token in a TXT record named %s, then POST /v1/domains/%s/verify",
			VerificationRecord(d.Name), d.Name))
	}
	return d, nil
}

func errDomainField(detail string) error {
	return &apperr.Error{Code: apperr.Unprocessable, Message: "the link request is invalid",
		Fields: []apperr.FieldError{{Field: "domain", Detail: detail}}}
}

// checkFallback checks a domain's fallback URL ("" is none) as a link's
// target is checked.
func (s *Service) checkFallback(fallbackURL string) []apperr.FieldError {
	if fallbackURL == "" {
		return nil
	}
	if _, err := s.opts.Targets.ValidateTarget(fallbackURL); err != nil {
		return []apperr.FieldError{{Field: "fallback_url", Detail: err.Error()}}
	}
	return nil
}

// UpdateDomain sets the fallback URL of a domain the caller owns ("" for
// none: an unknown code there is then a 404). Every node redirects to the
// new one as soon as it hears of the change, or within links.cache_ttl.
func (s *Service) UpdateDomain(ctx context.Context, caller Caller, name, fallbackURL string) (Domain, error) {
	d, err := s.Domain(ctx, caller, name)
	if err != nil {
		return Domain{}, err
	}
	if err := apperr.Fields(apperr.Unprocessable, "the domain request is invalid", s.checkFallback(fallbackURL)); err != nil {
		return Domain{}, err
	}
	ds, _ := s.domainStore()
	d, err = ds.UpdateDomain(ctx, d.Name, d.Owner, fallbackURL)
	if err != nil {
		return Domain{}, err
	}
	s.domainsChanged()
	return d, nil
}

// DeleteDomain removes a domain (or claim) the caller owns. A domain with
// links is kept (Conflict): delete its links first.
func (s *Service) DeleteDomain(ctx context.Context, caller Caller, name string) error {
	d, err := s.Domain(ctx, caller, name)
	if err != nil {
		return err
	}
	ds, _ := s.domainStore()
	if err := ds.DeleteDomain(ctx, d.Name, d.Owner); err != nil {
		return err
	}
	s.domainsChanged()
	return nil
}

// domainsChanged drops this node's domain set and tells the others to
// drop theirs (Options.AnnounceDomains).
func (s *Service) domainsChanged() {
	s.ForgetDomains()
	if s.opts.AnnounceDomains == nil {
		return
	}
	if err := s.opts.AnnounceDomains(); err != nil {
		s.log.Warn("announcing a domain change failed; other nodes see it when their domain list is next read",
			slog.Duration("cache_ttl", s.opts.CacheTTL), slog.Any("error", err))
	}
}

// ForgetDomains makes the next redirect read the registered domains
// again. A node calls it on hearing that a domain was added or removed.
func (s *Service) ForgetDomains() {
	s.dom.gen.Add(1)
	if old := s.dom.set.Load(); old != nil {
		s.dom.set.Store(&domainSet{m: old.m}) // until 0: stale, still answering while the store fails
	}
}

// hostDomain returns the registered domain of a request's host (see
// RequestHost), reading the domains again when this node's list is older
// than CacheTTL, one read in flight. While the store fails, the last list
// read answers; before any was read, no host is a domain.
func (s *Service) hostDomain(ctx context.Context, host string) (Domain, bool) {
	if _, ok := s.store.(DomainStore); !ok || host == "" {
		return Domain{}, false
	}
	now := s.now()
	set := s.dom.set.Load()
	if set == nil || now.UnixMicro() >= set.until {
		v, _, _ := s.flight.Do("\x00domains", func() (any, error) { return s.loadDomains(ctx, now) })
		set = v.(*domainSet)
	}
	d, ok := set.m[host]
	return d, ok
}

// loadDomains reads the domains into this node's set; it never fails.
func (s *Service) loadDomains(ctx context.Context, now time.Time) (*domainSet, error) {
	ds := s.store.(DomainStore)
	gen := s.dom.gen.Load()
	all, err := ds.Domains(ctx, MaxDomains)
	if err != nil {
		s.log.Warn("reading the custom domains failed; using the last list read", slog.Any("error", err))
		// The last list read answers (none before the first read), and the
		// store is asked again after staleRetry, not at every redirect.
		var m map[string]Domain
		if old := s.dom.set.Load(); old != nil {
			m = old.m
		}
		retry := &domainSet{m: m, until: now.Add(staleRetry).UnixMicro()}
		s.dom.set.Store(retry)
		return retry, nil
	}
	set := &domainSet{m: make(map[string]Domain, len(all)), until: now.Add(s.opts.CacheTTL).UnixMicro()}
	for _, d := range all {
		if s.ownHost(d.Name) {
			continue // the server's own routes win (see CheckOwnHosts)
		}
		if old, ok := set.m[d.Name]; ok && old.Verified() {
			continue
		}
		if !d.Verified() {
			// A claim: the host is a domain whose codes answer 404,
			// without its fallback, until one owner proves control.
			d.FallbackURL = ""
		}
		set.m[d.Name] = d
	}
	if s.dom.gen.Load() != gen {
		set.until = 0 // a change was announced while reading: read again
	}
	s.dom.set.Store(set)
	return set, nil
}

// ResolveHost is Resolve for a request to host (the Host header, as
// RequestHost reads it): on a registered domain code names that domain's
// link, and an unknown code there goes to the domain's fallback URL (a
// Target with only URL set, recording nothing) when it has one; on any
// other host code names a link without a domain. On a domain only claimed,
// not verified, every code is unknown and no fallback is used.
func (s *Service) ResolveHost(ctx context.Context, host, code, client string) (Target, error) {
	d, ok := s.hostDomain(ctx, RequestHost(host))
	if !ok {
		return s.Resolve(ctx, code, client)
	}
	if !validCode(code) || !d.Verified() {
		return s.domainUnknown(ctx, d, client)
	}
	t, err := s.resolveKey(ctx, Key(d.Name, code), d.Name, client)
	if err == ErrNotFound && d.FallbackURL != "" {
		return Target{URL: d.FallbackURL, Unknown: true, Domain: d.Name}, nil
	}
	t.Domain = d.Name
	return t, err
}

// domainUnknown answers a code that cannot be a link on domain d.
func (s *Service) domainUnknown(ctx context.Context, d Domain, client string) (Target, error) {
	err := s.unknownCode(ctx, d.Name, client, s.now().UnixMicro())
	if err == ErrNotFound && d.FallbackURL != "" {
		return Target{URL: d.FallbackURL, Unknown: true}, nil
	}
	return Target{}, err
}

// LinkURL is the public URL of l: on its domain, with the base URL's
// scheme, else under the base URL.
func (s *Service) LinkURL(l Link) string {
	if l.Domain == "" {
		return s.ShortURL(l.Code)
	}
	scheme, _, _ := strings.Cut(s.baseURL, "://")
	return scheme + "://" + l.Domain + "/" + l.Code
}

// hostOf is the host[:port] of an absolute URL.
func hostOf(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	host, _, _ := strings.Cut(rest, "/")
	return host
}
