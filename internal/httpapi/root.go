package httpapi

import (
	"context"
	"net/http"
)

// domainHosts tells a custom short domain's Host from the API's own
// (*shorten.Service).
type domainHosts interface {
	IsDomainHost(ctx context.Context, host string) bool
}

// root answers GET / on the API's own host with 302 to the dashboard. On
// a registered custom short domain, / is no link and no dashboard: it
// answers 404 as any unrouted path does.
func (s *Server) root(w http.ResponseWriter, r *http.Request) error {
	if d, ok := s.opts.Links.(domainHosts); ok && d.IsDomainHost(r.Context(), r.Host) {
		WriteProblem(w, r, NewProblem(http.StatusNotFound, "not-found", "", "no route for "+r.Method+" "+r.URL.Path))
		return nil
	}
	http.Redirect(w, r, "/ui/", http.StatusFound)
	return nil
}
