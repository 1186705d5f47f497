package shorten

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicehq/sluice/internal/apperr"
)

// DomainOptions configures custom domains. The zero value registers
// domains without proof, never refuses a host but the base URL's, and
// caps them at DefaultDomainsPerOwner per owner and MaxDomains in all.
type DomainOptions struct {
	// OwnHosts are the hosts this server answers on besides the base
	// URL's (the dashboard's public URL, the provider callback URL, the
	// allowed hosts, the gateway's name), in any case, with or without a
	// port or a trailing dot: none can be registered as a custom domain,
	// and one registered before it was listed is not served as one.
	OwnHosts []string
	// Verify makes a registration a claim that serves nothing until a TXT
	// record VerificationRecord(name) holds its token (VerifyDomain, and
	// CheckDomainClaims every VerifyInterval). If false, a domain is
	// verified as it is registered.
	Verify bool
	// LookupTXT returns the TXT records of a name, each record's strings
	// joined. If nil, net.DefaultResolver.LookupTXT (the system resolver).
	LookupTXT func(ctx context.Context, name string) ([]string, error)
	// VerifyInterval is the time between checks of the unverified claims
	// (default 10 minutes).
	VerifyInterval time.Duration
	// MaxPerOwner bounds the domains and claims one owner holds (default
	// DefaultDomainsPerOwner); Max bounds them in all (default and at most
	// MaxDomains).
	MaxPerOwner, Max int

	own map[string]bool // OwnHosts as RequestHost reads them
}

// DefaultDomainsPerOwner is DomainOptions.MaxPerOwner's default.
const DefaultDomainsPerOwner = 100

// lookupTimeout bounds one TXT lookup.
const lookupTimeout = 5 * time.Second

func (o DomainOptions) withDefaults() DomainOptions {
	o.VerifyInterval = cmp.Or(o.VerifyInterval, 10*time.Minute)
	o.MaxPerOwner = cmp.Or(o.MaxPerOwner, DefaultDomainsPerOwner)
	o.Max = min(cmp.Or(o.Max, MaxDomains), MaxDomains)
	if o.LookupTXT == nil {
		o.LookupTXT = net.DefaultResolver.LookupTXT
	}
	o.own = make(map[string]bool, len(o.OwnHosts))
	for _, h := range o.OwnHosts {
		if h = RequestHost(h); h != "" {
			o.own[h] = true
		}
	}
	return o
}

// ownHost says whether name (as NormalizeDomain gives it) is a host this
// server answers on itself.
func (s *Service) ownHost(name string) bool {
	return name == RequestHost(hostOf(s.baseURL)) || s.opts.Domains.own[name]
}

// newDomainToken is a claim's verification token: 20 random bytes in hex.
func newDomainToken() (string, error) {
	var b [20]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("domain token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// lookupTokens returns the TXT values published at domain's verification
// record, and why none can be read ("" when the lookup answered).
func (s *Service) lookupTokens(ctx context.Context, domain string) ([]string, string) {
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	name := VerificationRecord(domain)
	txts, err := s.opts.Domains.LookupTXT(ctx, name)
	var dnsErr *net.DNSError
	switch {
	case err == nil:
		for i, t := range txts {
			txts[i] = strings.TrimSpace(t)
		}
		return txts, ""
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return nil, fmt.Sprintf("no TXT record named %s was found", name)
	default:
		return nil, fmt.Sprintf("looking up the TXT record %s failed: %v", name, err)
	}
}

// VerifyDomain checks the caller's claim of name now: when the TXT record
// VerificationRecord(name) holds its token, the claim is verified (every
// other owner's claim is dropped) and the domain serves from then on. It
// returns the domain as it stands and, while it is not verified, why. A
// domain already verified stays so without a lookup: proof of control is
// asked once. Another owner's claim verified meanwhile is a Conflict.
func (s *Service) VerifyDomain(ctx context.Context, caller Caller, name string) (Domain, string, error) {
	d, err := s.Domain(ctx, caller, name)
	if err != nil || d.Verified() {
		return d, "", err
	}
	txts, why := s.lookupTokens(ctx, d.Name)
	if why != "" {
		return d, why, nil
	}
	if !slices.Contains(txts, d.Token) {
		return d, fmt.Sprintf("the TXT record %s does not hold this claim's verification_token", VerificationRecord(d.Name)), nil
	}
	ds, _ := s.domainStore()
	v, err := ds.VerifyDomain(ctx, d.Name, d.Owner, s.now())
	if err != nil {
		return Domain{}, "", err
	}
	s.log.Info("custom domain verified", slog.String(logKeyDomain, v.Name), slog.String(logKeyOwner, v.Owner))
	s.domainsChanged()
	return v, "", nil
}

// Log attribute keys of the domain checks.
const (
	logKeyDomain = "domain"
	logKeyOwner  = "owner"
)

// CheckDomainClaims looks up the TXT record of every domain that has
// unverified claims, one lookup a name, a few at a time, and verifies the
// oldest claim whose token it finds. It returns how many it verified.
// Verified domains are not looked up again.
func (s *Service) CheckDomainClaims(ctx context.Context) (int, error) {
	ds, err := s.domainStore()
	if err != nil {
		return 0, err
	}
	all, err := ds.Domains(ctx, MaxDomains)
	if err != nil {
		return 0, err
	}
	pending := map[string][]Domain{}
	for _, d := range all {
		if !d.Verified() && !s.ownHost(d.Name) {
			pending[d.Name] = append(pending[d.Name], d)
		}
	}
	verified := make(chan Domain, len(pending))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for name, claims := range pending {
		g.Go(func() error {
			txts, _ := s.lookupTokens(gctx, name)
			slices.SortFunc(claims, func(a, b Domain) int { return a.CreatedAt.Compare(b.CreatedAt) })
			for _, c := range claims {
				if !slices.Contains(txts, c.Token) {
					continue
				}
				v, err := ds.VerifyDomain(gctx, c.Name, c.Owner, s.now())
				if err == nil {
					verified <- v
				} else if !apperr.Is(err, apperr.Conflict) && !apperr.Is(err, apperr.NotFound) {
					s.log.Warn("verifying a custom domain failed", slog.String(logKeyDomain, name), slog.Any("error", err))
				}
				return nil
			}
			return nil
		})
	}
	_ = g.Wait()
	close(verified)
	n := 0
	for v := range verified {
		n++
		s.log.Info("custom domain verified", slog.String(logKeyDomain, v.Name), slog.String(logKeyOwner, v.Owner))
	}
	if n > 0 {
		s.domainsChanged()
	}
	return n, ctx.Err()
}

// CheckOwnHosts logs a warning for every registered domain that is a host
// this server answers on (one registered before the host was configured):
// such a domain is not served as a custom domain, the server's own routes
// win; its owner or an admin should delete it. It returns their names.
func (s *Service) CheckOwnHosts(ctx context.Context) ([]string, error) {
	ds, err := s.domainStore()
	if err != nil {
		return nil, nil // no domains
	}
	all, err := ds.Domains(ctx, MaxDomains)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, d := range all {
		if s.ownHost(d.Name) && !slices.Contains(names, d.Name) {
			names = append(names, d.Name)
			s.log.Warn("a registered custom domain is one of this server's own hosts; it is not served as a custom domain (delete it)",
				slog.String(logKeyDomain, d.Name), slog.String(logKeyOwner, d.Owner))
		}
	}
	return names, nil
}

// RunDomains checks the server's own hosts against the registered domains
// (CheckOwnHosts) and then, while verification is on, the unverified
// claims every VerifyInterval (CheckDomainClaims), until ctx ends.
func (s *Service) RunDomains(ctx context.Context) error {
	if _, err := s.CheckOwnHosts(ctx); err != nil {
		s.log.Warn("checking the custom domains against this server's own hosts failed", slog.Any("error", err))
	}
	if !s.opts.Domains.Verify {
		return nil
	}
	t := time.NewTicker(s.opts.Domains.VerifyInterval)
	defer t.Stop()
	for {
		if _, err := s.CheckDomainClaims(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("checking the custom domain claims failed", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
