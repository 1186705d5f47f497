package shorten

import "context"

// IsDomainHost reports whether host (a request's Host header) names a
// registered custom short domain, verified or not, as redirects read it:
// from this node's cached list of domains.
func (s *Service) IsDomainHost(ctx context.Context, host string) bool {
	_, ok := s.hostDomain(ctx, RequestHost(host))
	return ok
}
